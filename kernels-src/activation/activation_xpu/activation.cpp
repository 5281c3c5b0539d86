// The XPU ops (Intel GPUs, SYCL): the same argument checks as every backend,
// then SYCL kernels submitted to torch's current XPU queue, so they are
// ordered with the surrounding torch ops. The kernels mirror the CUDA ones:
// 16-byte accesses where pointers and row width allow, one work-group per row
// for the gated ops (group-stride over rows), a group-stride loop over the
// flat range sized to the device for the elementwise ones, math in float for
// every dtype, rounded once on store.
#include "../activation_common/op_checks.h"
#include "../torch-ext/torch_binding.h"

#include <c10/core/DeviceGuard.h>
#include <c10/xpu/XPUStream.h>
#include <sycl/sycl.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace activation_xpu {
namespace {

using bfloat16_t = sycl::ext::oneapi::bfloat16;
using half_t = sycl::half;

// ---- activations (float in, float out) -------------------------------------

// x * sigmoid(z) as x / (1 + exp(-z)); `neg_z` is -z. exp overflowing to inf
// gives the correct limit (a signed zero); NaN propagates.
inline float x_times_sigmoid(float x, float neg_z) { return x / (1.0f + sycl::exp(neg_z)); }

struct SiluOp {
  float operator()(float x) const { return x_times_sigmoid(x, -x); }
};

struct GeluOp {  // 0.5 * x * (1 + erf(x / sqrt(2))) == 0.5 * x * erfc(-x / sqrt(2))
  float operator()(float x) const { return 0.5f * x * sycl::erfc(-x * 0.70710678118654752f); }
};

struct GeluTanhOp {  // 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u)
  float operator()(float x) const {
    constexpr float kBeta = 0.7978845608028654f;
    constexpr float kKappa = 0.044715f;
    return x_times_sigmoid(x, x * sycl::fma(x * x, -2.0f * kBeta * kKappa, -2.0f * kBeta));
  }
};

struct GeluQuickOp {
  float operator()(float x) const { return x_times_sigmoid(x, -1.702f * x); }
};

struct FatReluOp {
  float threshold;
  float operator()(float x) const { return x > threshold ? x : 0.0f; }
};

// ---- kernels ---------------------------------------------------------------

constexpr int kAccessBytes = 16;
constexpr int64_t kSubGroupMultiple = 32;
constexpr int64_t kUnaryGroupSize = 256;
constexpr int64_t kMaxGroups = int64_t{1} << 20;

template <typename T>
struct alignas(kAccessBytes) Pack {
  static constexpr int kSize = kAccessBytes / static_cast<int>(sizeof(T));
  T v[kSize];
};

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kAccessBytes == 0; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T, typename Op>
void gated(sycl::queue& queue, T* out, const T* input, int64_t rows, int64_t d, Op op,
           bool act_on_second) {
  using P = Pack<T>;
  const bool vectorized = d % P::kSize == 0 && aligned(input) && aligned(out);
  const int64_t per_row = vectorized ? d / P::kSize : d;
  const int64_t max_group =
      static_cast<int64_t>(queue.get_device().get_info<sycl::info::device::max_work_group_size>());
  const int64_t group =
      std::min(max_group, ceil_div(per_row, kSubGroupMultiple) * kSubGroupMultiple);
  const int64_t groups = std::min(rows, kMaxGroups);
  queue.parallel_for(
      sycl::nd_range<1>(static_cast<size_t>(groups * group), static_cast<size_t>(group)),
      [=](sycl::nd_item<1> item) {
        const int64_t local = static_cast<int64_t>(item.get_local_id(0));
        const int64_t threads = static_cast<int64_t>(item.get_local_range(0));
        for (int64_t row = static_cast<int64_t>(item.get_group(0)); row < rows;
             row += static_cast<int64_t>(item.get_group_range(0))) {
          const T* first = input + row * 2 * d;
          const T* act_in = act_on_second ? first + d : first;
          const T* mul_in = act_on_second ? first : first + d;
          T* dst = out + row * d;
          if (vectorized) {
            for (int64_t i = local; i < per_row; i += threads) {
              const P a = reinterpret_cast<const P*>(act_in)[i];
              const P b = reinterpret_cast<const P*>(mul_in)[i];
              P r;
#pragma unroll
              for (int k = 0; k < P::kSize; ++k) {
                r.v[k] = T(op(static_cast<float>(a.v[k])) * static_cast<float>(b.v[k]));
              }
              reinterpret_cast<P*>(dst)[i] = r;
            }
          } else {
            for (int64_t i = local; i < d; i += threads) {
              dst[i] = T(op(static_cast<float>(act_in[i])) * static_cast<float>(mul_in[i]));
            }
          }
        }
      });
}

template <typename T, typename Op>
void unary(sycl::queue& queue, T* out, const T* input, int64_t numel, Op op) {
  using P = Pack<T>;
  const bool vectorized = aligned(input) && aligned(out);
  const int64_t work = vectorized ? ceil_div(numel, P::kSize) : numel;
  const int64_t units =
      static_cast<int64_t>(queue.get_device().get_info<sycl::info::device::max_compute_units>());
  const int64_t groups =
      std::max<int64_t>(1, std::min(ceil_div(work, kUnaryGroupSize), units * 8));
  queue.parallel_for(
      sycl::nd_range<1>(static_cast<size_t>(groups * kUnaryGroupSize),
                        static_cast<size_t>(kUnaryGroupSize)),
      [=](sycl::nd_item<1> item) {
        const int64_t first = static_cast<int64_t>(item.get_global_id(0));
        const int64_t stride = static_cast<int64_t>(item.get_global_range(0));
        int64_t done = 0;
        if (vectorized) {
          const int64_t packs = numel / P::kSize;
          for (int64_t i = first; i < packs; i += stride) {
            const P a = reinterpret_cast<const P*>(input)[i];
            P r;
#pragma unroll
            for (int k = 0; k < P::kSize; ++k) {
              r.v[k] = T(op(static_cast<float>(a.v[k])));
            }
            reinterpret_cast<P*>(out)[i] = r;
          }
          done = packs * P::kSize;
        }
        for (int64_t i = done + first; i < numel; i += stride) {
          out[i] = T(op(static_cast<float>(input[i])));
        }
      });
}

// ---- op layer --------------------------------------------------------------

void check_common(const char* op, const at::Tensor& out, const at::Tensor& input) {
  activation_common::check_tensors(op, out, input, c10::DeviceType::XPU, "XPU",
                                   {c10::kFloat, c10::kBFloat16, c10::kHalf},
                                   "float32, bfloat16 or float16");
}

sycl::queue& current_queue(const at::Tensor& t) {
  return c10::xpu::getCurrentXPUStream(t.device().index()).queue();
}

// Calls fn with a typed null pointer whose type is the tensor's element type.
template <typename Fn>
void with_dtype(const at::Tensor& t, const Fn& fn) {
  switch (t.scalar_type()) {
    case c10::kHalf: return fn(static_cast<half_t*>(nullptr));
    case c10::kBFloat16: return fn(static_cast<bfloat16_t*>(nullptr));
    default: return fn(static_cast<float*>(nullptr));  // check_common allowed nothing else
  }
}

template <typename Op>
void run_gated(const char* op, at::Tensor& out, const at::Tensor& input, Op act,
               bool act_on_second) {
  check_common(op, out, input);
  const int64_t d = activation_common::check_gated_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  const c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  activation_common::into(out, [&](at::Tensor& dst) {
    with_dtype(x, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      gated(current_queue(x), static_cast<T*>(dst.data_ptr()),
            static_cast<const T*>(x.const_data_ptr()), x.numel() / (2 * d), d, act,
            act_on_second);
    });
  });
}

template <typename Op>
void run_unary(const char* op, at::Tensor& out, const at::Tensor& input, Op act) {
  check_common(op, out, input);
  activation_common::check_unary_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  const c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  activation_common::into(out, [&](at::Tensor& dst) {
    with_dtype(x, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      unary(current_queue(x), static_cast<T*>(dst.data_ptr()),
            static_cast<const T*>(x.const_data_ptr()), x.numel(), act);
    });
  });
}

}  // namespace
}  // namespace activation_xpu

using activation_xpu::FatReluOp;
using activation_xpu::GeluOp;
using activation_xpu::GeluQuickOp;
using activation_xpu::GeluTanhOp;
using activation_xpu::run_gated;
using activation_xpu::run_unary;
using activation_xpu::SiluOp;

void silu_and_mul(at::Tensor& out, const at::Tensor& input) {
  run_gated("silu_and_mul", out, input, SiluOp{}, false);
}

void mul_and_silu(at::Tensor& out, const at::Tensor& input) {
  run_gated("mul_and_silu", out, input, SiluOp{}, true);
}

void gelu_and_mul(at::Tensor& out, const at::Tensor& input) {
  run_gated("gelu_and_mul", out, input, GeluOp{}, false);
}

void gelu_tanh_and_mul(at::Tensor& out, const at::Tensor& input) {
  run_gated("gelu_tanh_and_mul", out, input, GeluTanhOp{}, false);
}

void fatrelu_and_mul(at::Tensor& out, const at::Tensor& input, double threshold) {
  run_gated("fatrelu_and_mul", out, input, FatReluOp{static_cast<float>(threshold)}, false);
}

void silu(at::Tensor& out, const at::Tensor& input) { run_unary("silu", out, input, SiluOp{}); }

void gelu(at::Tensor& out, const at::Tensor& input) { run_unary("gelu", out, input, GeluOp{}); }

void gelu_tanh(at::Tensor& out, const at::Tensor& input) {
  run_unary("gelu_tanh", out, input, GeluTanhOp{});
}

// gelu_fast and gelu_new are the tanh approximation written two other ways.
void gelu_fast(at::Tensor& out, const at::Tensor& input) {
  run_unary("gelu_fast", out, input, GeluTanhOp{});
}

void gelu_new(at::Tensor& out, const at::Tensor& input) {
  run_unary("gelu_new", out, input, GeluTanhOp{});
}

void gelu_quick(at::Tensor& out, const at::Tensor& input) {
  run_unary("gelu_quick", out, input, GeluQuickOp{});
}
