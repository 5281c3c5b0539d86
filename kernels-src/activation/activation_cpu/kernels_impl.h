// The vectorized loops behind every op, written once against at::vec and
// compiled once per CPU capability: the including file (kernels_<cap>.cpp)
// selects the instruction set and defines ACTIVATION_KERNEL_TABLE, the name of
// the table this copy exports. Everything else stays in an anonymous namespace,
// so the copies never share a symbol.
//
// Reduced-precision inputs (bf16/fp16) are widened to float vectors, computed
// in float and rounded once on store. Work is split over the flat element
// range, not over rows, so one long row or many short ones both use every
// thread.
#pragma once

#include "kernels.h"

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#ifdef CPU_CAPABILITY_AVX512
#include "avx512_math.h"
#endif

#ifndef ACTIVATION_KERNEL_TABLE
#error "define ACTIVATION_KERNEL_TABLE before including kernels_impl.h"
#endif

namespace activation_cpu {
namespace {

using at::vec::Vectorized;

// Below this many elements a single thread is faster than waking the pool.
constexpr int64_t kGrainSize = 16384;

// float: the polynomial exp (<= 20 ulp) is several times cheaper than the
// precise one and far inside the 1e-5 tolerance the ops promise; double keeps
// the precise exp so float64 results stay a trustworthy reference.
inline Vectorized<float> fast_exp(const Vectorized<float>& x) {
  return x.exp_u20();
}
inline Vectorized<double> fast_exp(const Vectorized<double>& x) {
  return x.exp();
}

// What a result is rounded to: the sigmoid's error budget. Float results keep
// about 20 ulp of float; results rounded to bf16 (8 significant bits) need
// 2^-13, which the AVX-512 copies meet with less work (avx512_math.h).
struct FloatResult {};
struct Bf16Result {};

// x * sigmoid(z) computed as x / (1 + exp(-z)); `neg_scaled` is -z.
// The polynomial exp is unspecified past float's range (the AVX2 copy returns
// 0 above ~88.7, which would turn silu(-100) into -100), so its argument is
// clamped at 88: exp(88) ~ 1.7e38 already makes the quotient vanish to within
// float resolution of the true value. NaN passes through the clamp.
// The AVX-512 copies compute float with avx512::sigmoid_product instead
// (an exp and a reciprocal without VDIVPS; see avx512_math.h).
template <typename V, typename Result>
inline V x_times_sigmoid(const V& x, const V& neg_scaled, Result) {
#ifdef CPU_CAPABILITY_AVX512
  if constexpr (std::is_same_v<V, Vectorized<float>>) {
    return avx512::sigmoid_product<std::is_same_v<Result, Bf16Result>>(x, neg_scaled);
  }
#endif
  const V clamped = at::vec::minimum(neg_scaled, V(88));
  return x / (V(1) + fast_exp(clamped));
}

// Each activation: operator()(x, result) with `result` a FloatResult or a
// Bf16Result (the accuracy its caller rounds to).
struct SiluOp {
  template <typename V, typename Result = FloatResult>
  V operator()(const V& x, Result result = {}) const {
    return x_times_sigmoid(x, V(0) - x, result);
  }
};

struct GeluQuickOp {
  template <typename V, typename Result = FloatResult>
  V operator()(const V& x, Result result = {}) const {
    return x_times_sigmoid(x, x * V(-1.702), result);
  }
};

// 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u): one exp, and no cancellation in
// 1 + tanh(u) for negative x, so relative accuracy holds on the whole line.
struct GeluTanhOp {
  template <typename V, typename Result = FloatResult>
  V operator()(const V& x, Result result = {}) const {
    constexpr double kBeta = 0.7978845608028654;  // sqrt(2 / pi)
    constexpr double kKappa = 0.044715;
    const V x2 = x * x;
    const V neg_two_u = x * at::vec::fmadd(x2, V(-2.0 * kBeta * kKappa), V(-2.0 * kBeta));
    return x_times_sigmoid(x, neg_two_u, result);
  }
};

struct GeluOp {
  template <typename V, typename Result = FloatResult>
  V operator()(const V& x, Result = {}) const {
    constexpr double kRsqrt2 = 0.7071067811865476;
    return V(0.5) * x * (V(1) + (x * V(kRsqrt2)).erf());
  }
};

struct FatReluOp {
  float threshold;
  template <typename V, typename Result = FloatResult>
  V operator()(const V& x, Result = {}) const {
    return V::blendv(V(0), x, x > V(threshold));
  }
};

// ---- one contiguous run of elements ----------------------------------------

template <typename scalar_t, typename Act>
inline void gated_run(scalar_t* out, const scalar_t* a, const scalar_t* b, int64_t n,
                      const Act& act) {
  if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
    using V = Vectorized<scalar_t>;
    int64_t i = 0;
    for (; i + V::size() <= n; i += V::size()) {
      (act(V::loadu(a + i)) * V::loadu(b + i)).store(out + i);
    }
    if (i < n) {
      const int64_t rest = n - i;
      (act(V::loadu(a + i, rest)) * V::loadu(b + i, rest)).store(out + i, rest);
    }
#ifdef CPU_CAPABILITY_AVX512
  } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    // 32 values per step as even/odd float vectors (avx512_math.h): the order
    // of elements does not matter to an elementwise product.
    using V = Vectorized<float>;
    auto step = [&](__mmask32 lanes, int64_t i) {
      const avx512::Pair pa = avx512::load(a + i, lanes);
      const avx512::Pair pb = avx512::load(b + i, lanes);
      avx512::store(out + i, lanes,
                    {act(V(pa.even), Bf16Result{}) * V(pb.even),
                     act(V(pa.odd), Bf16Result{}) * V(pb.odd)});
    };
    avx512::for_each_step(n, step);
#endif
  } else {
    using R = Vectorized<scalar_t>;  // bf16/fp16: one R holds two float vectors
    int64_t i = 0;
    auto step = [&](const R& ra, const R& rb) {
      auto [a0, a1] = at::vec::convert_to_float<scalar_t>(ra);
      auto [b0, b1] = at::vec::convert_to_float<scalar_t>(rb);
      return at::vec::convert_from_float<scalar_t>(act(a0) * b0, act(a1) * b1);
    };
    for (; i + R::size() <= n; i += R::size()) {
      step(R::loadu(a + i), R::loadu(b + i)).store(out + i);
    }
    if (i < n) {
      const int64_t rest = n - i;
      step(R::loadu(a + i, rest), R::loadu(b + i, rest)).store(out + i, rest);
    }
  }
}

template <typename scalar_t, typename Act>
inline void unary_run(scalar_t* out, const scalar_t* a, int64_t n, const Act& act) {
  if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
    using V = Vectorized<scalar_t>;
    int64_t i = 0;
    for (; i + V::size() <= n; i += V::size()) {
      act(V::loadu(a + i)).store(out + i);
    }
    if (i < n) {
      const int64_t rest = n - i;
      act(V::loadu(a + i, rest)).store(out + i, rest);
    }
#ifdef CPU_CAPABILITY_AVX512
  } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    using V = Vectorized<float>;
    auto step = [&](__mmask32 lanes, int64_t i) {
      const avx512::Pair pa = avx512::load(a + i, lanes);
      avx512::store(out + i, lanes, {act(V(pa.even), Bf16Result{}), act(V(pa.odd), Bf16Result{})});
    };
    avx512::for_each_step(n, step);
#endif
  } else {
    using R = Vectorized<scalar_t>;
    int64_t i = 0;
    auto step = [&](const R& ra) {
      auto [a0, a1] = at::vec::convert_to_float<scalar_t>(ra);
      return at::vec::convert_from_float<scalar_t>(act(a0), act(a1));
    };
    for (; i + R::size() <= n; i += R::size()) {
      step(R::loadu(a + i)).store(out + i);
    }
    if (i < n) {
      const int64_t rest = n - i;
      step(R::loadu(a + i, rest)).store(out + i, rest);
    }
  }
}

// ---- whole tensors ----------------------------------------------------------

template <typename scalar_t, typename Act>
void gated_loop(const GatedArgs& args, const Act& act) {
  auto* out = static_cast<scalar_t*>(args.out);
  const auto* input = static_cast<const scalar_t*>(args.input);
  const int64_t d = args.d;
  const int64_t act_offset = args.act_on_second ? d : 0;
  const int64_t mul_offset = args.act_on_second ? 0 : d;
  at::parallel_for(0, args.rows * d, kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t row = begin / d;
    int64_t col = begin % d;
    for (int64_t done = begin; done < end; ++row, col = 0) {
      const int64_t n = std::min(d - col, end - done);
      const scalar_t* in_row = input + row * 2 * d + col;
      gated_run(out + row * d + col, in_row + act_offset, in_row + mul_offset, n, act);
      done += n;
    }
  });
}

template <typename scalar_t, typename Act>
void unary_loop(const UnaryArgs& args, const Act& act) {
  auto* out = static_cast<scalar_t*>(args.out);
  const auto* input = static_cast<const scalar_t*>(args.input);
  at::parallel_for(0, args.numel, kGrainSize, [&](int64_t begin, int64_t end) {
    unary_run(out + begin, input + begin, end - begin, act);
  });
}

// Calls fn(act_functor) for the requested activation.
template <typename Fn>
void with_activation(Activation act, float threshold, const Fn& fn) {
  switch (act) {
    case Activation::Silu:
      return fn(SiluOp{});
    case Activation::Gelu:
      return fn(GeluOp{});
    case Activation::GeluTanh:
      return fn(GeluTanhOp{});
    case Activation::GeluQuick:
      return fn(GeluQuickOp{});
    case Activation::FatRelu:
      return fn(FatReluOp{threshold});
  }
}

// Calls fn(scalar_t{}) for the requested dtype; the op layer has already
// rejected every other dtype.
template <typename Fn>
void with_dtype(c10::ScalarType dtype, const Fn& fn) {
  switch (dtype) {
    case c10::ScalarType::Float:
      return fn(float{});
    case c10::ScalarType::Double:
      return fn(double{});
    case c10::ScalarType::BFloat16:
      return fn(c10::BFloat16{});
    case c10::ScalarType::Half:
      return fn(c10::Half{});
    default:
      return;
  }
}

void gated(const GatedArgs& args) {
  with_dtype(args.dtype, [&](auto tag) {
    using scalar_t = decltype(tag);
    with_activation(args.act, args.threshold,
                    [&](const auto& act) { gated_loop<scalar_t>(args, act); });
  });
}

void unary(const UnaryArgs& args) {
  with_dtype(args.dtype, [&](auto tag) {
    using scalar_t = decltype(tag);
    with_activation(args.act, 0.0f,
                    [&](const auto& act) { unary_loop<scalar_t>(args, act); });
  });
}

#define ACTIVATION_STRINGIFY_(x) #x
#define ACTIVATION_STRINGIFY(x) ACTIVATION_STRINGIFY_(x)

constexpr KernelTable kTable{ACTIVATION_STRINGIFY(CPU_CAPABILITY), &gated, &unary};

}  // namespace

const KernelTable* ACTIVATION_KERNEL_TABLE() {
  return &kTable;
}

}  // namespace activation_cpu
