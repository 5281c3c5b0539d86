// The loops behind every op, written once as plain C++ and compiled once per
// CPU capability: the including file (kernels_<cap>.cpp) selects the
// instruction set and defines RMSNORM_KERNEL_TABLE, the name of the table this
// copy exports. GCC -O3 vectorizes them: reductions keep kLanes independent
// partial sums (a fixed order, so every copy rounds alike), and the
// elementwise passes are straight loops over rows that stay in cache.
#pragma once

#include "kernels.h"
#include "scalar.h"

#ifdef RMSNORM_BF16_ROWS
#include "bf16_rows.h"
#endif

#include <cmath>
#include <cstdint>

#ifndef RMSNORM_KERNEL_TABLE
#error "define RMSNORM_KERNEL_TABLE before including kernels_impl.h"
#endif

namespace rmsnorm_cpu {
namespace {

// Independent partial sums per reduction: two AVX-512 registers of floats, so
// the adds pipeline instead of waiting on each other.
constexpr int64_t kLanes = 32;

template <typename A>
inline A fold(A (&lanes)[kLanes]) {
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t j = 0; j < width; ++j) {
      lanes[j] += lanes[j + width];
    }
  }
  return lanes[0];
}

// sum_i term(i) over [0, n) with kLanes partial sums.
template <typename A, typename Term>
inline A lane_sum(int64_t n, const Term& term) {
  A lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      lanes[j] += term(i + j);
    }
  }
  for (int64_t j = 0; i + j < n; ++j) {
    lanes[j] += term(i + j);
  }
  return fold(lanes);
}

// out = x * rstd * w (or * (1 + w)), with Llama's rounding for 16-bit types.
template <typename T>
inline void scale_row(const T* __restrict x, const T* __restrict w, T* out, int64_t n,
                      acc_t<T> rstd, bool unit_offset) {
  using A = acc_t<T>;
  if (unit_offset) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>(widen(x[i]) * rstd * (A(1) + widen(w[i])));
    }
  } else if constexpr (sizeof(T) >= sizeof(float)) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>(widen(w[i]) * (widen(x[i]) * rstd));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>(widen(w[i]) * widen(narrow<T>(widen(x[i]) * rstd)));
    }
  }
}

template <typename T>
void forward_rows(const ForwardArgs& args, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const T* w = static_cast<const T*>(args.weight);
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    T* out = static_cast<T*>(args.out) + row * n;
    A sum_squares;
    if (args.residual != nullptr) {
      // s = x + residual, rounded to T as PyTorch's add would; the norm is of s.
      const T* res = static_cast<const T*>(args.residual) + row * n;
      T* s = static_cast<T*>(args.sum) + row * n;
      for (int64_t i = 0; i < n; ++i) {
        s[i] = narrow<T>(widen(x[i]) + widen(res[i]));
      }
      sum_squares = lane_sum<A>(n, [&](int64_t i) {
        const A v = widen(s[i]);
        return v * v;
      });
      x = s;
    } else {
      sum_squares = lane_sum<A>(n, [&](int64_t i) {
        const A v = widen(x[i]);
        return v * v;
      });
    }
    scale_row(x, w, out, n, rstd_of<T>(sum_squares, n, args.eps), args.unit_offset);
  }
}

// y = wt * x * r, r = (mean(x^2) + eps)^-1/2, wt = w (+ 1):
//   dL/dx = r * g * wt - x * r^3 * mean(g * wt * x),   dL/dw = sum_rows g * x * r.
template <typename T>
void backward_rows(const BackwardArgs& args, int64_t begin, int64_t end, void* partial_raw) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const T* w = static_cast<const T*>(args.weight);
  const A offset = args.unit_offset ? A(1) : A(0);
  A* partial = static_cast<A*>(partial_raw);
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    const T* g = static_cast<const T*>(args.grad_out) + row * n;
    T* gx = static_cast<T*>(args.grad_x) + row * n;
    const A r = rstd_of<T>(lane_sum<A>(n,
                                       [&](int64_t i) {
                                         const A v = widen(x[i]);
                                         return v * v;
                                       }),
                           n, args.eps);
    const A dot = lane_sum<A>(
        n, [&](int64_t i) { return widen(g[i]) * (widen(w[i]) + offset) * widen(x[i]); });
    const A coef = r * r * r * dot / A(n);
    for (int64_t i = 0; i < n; ++i) {
      const A xi = widen(x[i]);
      const A gi = widen(g[i]);
      gx[i] = narrow<T>(r * gi * (widen(w[i]) + offset) - xi * coef);
      partial[i] += gi * xi * r;
    }
  }
}

template <typename T>
void reduce_columns(const void* partial_raw, int64_t blocks, int64_t n, void* grad_w_raw,
                    int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const A* partial = static_cast<const A*>(partial_raw);
  T* grad_w = static_cast<T*>(grad_w_raw);
  for (int64_t c = begin; c < end; ++c) {
    A total = 0;
    for (int64_t k = 0; k < blocks; ++k) {
      total += partial[k * n + c];
    }
    grad_w[c] = narrow<T>(total);
  }
}

template <typename T>
void silu_mul_range(const SiluMulArgs& args, int64_t begin, int64_t end) {
  const T* gate = static_cast<const T*>(args.gate);
  const T* up = static_cast<const T*>(args.up);
  T* out = static_cast<T*>(args.out);
  for (int64_t i = begin; i < end; ++i) {
    out[i] = narrow<T>(silu(widen(gate[i])) * widen(up[i]));
  }
}

// Calls fn(T{}) with the storage type of `dtype`.
template <typename Fn>
void with_dtype(DType dtype, const Fn& fn) {
  switch (dtype) {
    case DType::Float:
      return fn(float{});
    case DType::Double:
      return fn(double{});
    case DType::BFloat16:
      return fn(bf16_t{});
    case DType::Half:
      return fn(f16_t{});
  }
}

void forward(const ForwardArgs& args, int64_t begin, int64_t end) {
#ifdef RMSNORM_BF16_ROWS
  if (args.dtype == DType::BFloat16) {
    return bf16_rows::forward_rows(args, begin, end);
  }
#endif
  with_dtype(args.dtype, [&](auto tag) { forward_rows<decltype(tag)>(args, begin, end); });
}

void backward(const BackwardArgs& args, int64_t begin, int64_t end, void* partial) {
  with_dtype(args.dtype,
             [&](auto tag) { backward_rows<decltype(tag)>(args, begin, end, partial); });
}

void reduce(const void* partial, int64_t blocks, int64_t hidden, void* grad_w, DType dtype,
            int64_t begin, int64_t end) {
  with_dtype(dtype, [&](auto tag) {
    reduce_columns<decltype(tag)>(partial, blocks, hidden, grad_w, begin, end);
  });
}

void silu_mul(const SiluMulArgs& args, int64_t begin, int64_t end) {
  with_dtype(args.dtype, [&](auto tag) { silu_mul_range<decltype(tag)>(args, begin, end); });
}

#define RMSNORM_STRINGIFY_(x) #x
#define RMSNORM_STRINGIFY(x) RMSNORM_STRINGIFY_(x)

constexpr KernelTable kTable{RMSNORM_STRINGIFY(RMSNORM_CAPABILITY), &forward, &backward, &reduce,
                             &silu_mul};

}  // namespace

const KernelTable* RMSNORM_KERNEL_TABLE() {
  return &kTable;
}

}  // namespace rmsnorm_cpu
