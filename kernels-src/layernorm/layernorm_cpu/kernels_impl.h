// The loops behind every op, written once as plain C++ and compiled once per
// CPU capability: the including file (kernels_<cap>.cpp) selects the
// instruction set and defines LAYERNORM_KERNEL_TABLE, the name of the table
// this copy exports. GCC -O3 vectorizes them: reductions keep kLanes
// independent partial sums (a fixed order, so every copy rounds alike), and
// the passes over a row reuse it from cache.
#pragma once

#include "kernels.h"
#include "scalar.h"

#ifdef LAYERNORM_BF16_ROWS
#include "bf16_rows.h"
#endif

#include <cmath>
#include <cstdint>

#ifndef LAYERNORM_KERNEL_TABLE
#error "define LAYERNORM_KERNEL_TABLE before including kernels_impl.h"
#endif

namespace layernorm_cpu {
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

// mean and rstd of one row: the two-pass variance (sum of squared deviations
// from the mean), which keeps full precision when |mean| >> std.
template <typename T>
inline void moments(const T* x, int64_t n, double eps, acc_t<T>& mean, acc_t<T>& rstd) {
  using A = acc_t<T>;
  mean = lane_sum<A>(n, [&](int64_t i) { return widen(x[i]); }) / A(n);
  const A m = mean;
  const A var = lane_sum<A>(n, [&](int64_t i) {
                  const A d = widen(x[i]) - m;
                  return d * d;
                }) /
                A(n);
  rstd = A(1) / std::sqrt(var + A(eps));
}

// out = (x - mean) * rstd * w + b for one row, rounded once; a null w is 1,
// a null b 0. Four copies of the loop, so the innermost loops carry no branch.
template <typename T>
inline void normalize_row(const T* __restrict x, const T* __restrict w, const T* __restrict b,
                          T* out, int64_t n, acc_t<T> mean, acc_t<T> rstd) {
  if (w != nullptr && b != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>((widen(x[i]) - mean) * rstd * widen(w[i]) + widen(b[i]));
    }
  } else if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>((widen(x[i]) - mean) * rstd * widen(w[i]));
    }
  } else if (b != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>((widen(x[i]) - mean) * rstd + widen(b[i]));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = narrow<T>((widen(x[i]) - mean) * rstd);
    }
  }
}

template <typename T>
void forward_rows(const ForwardArgs& args, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const T* w = static_cast<const T*>(args.weight);
  const T* b = static_cast<const T*>(args.bias);
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    A mean, rstd;
    moments(x, n, args.eps, mean, rstd);
    normalize_row(x, w, b, static_cast<T*>(args.out) + row * n, n, mean, rstd);
  }
}

// xhat = (x - mean) * rstd, y = xhat * w + b:
//   dL/dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)),
//   dL/dw = sum_rows g * xhat,  dL/db = sum_rows g.
template <typename T>
void backward_rows(const BackwardArgs& args, int64_t begin, int64_t end, void* partial_raw) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const T* w = static_cast<const T*>(args.weight);
  A* partial_w = static_cast<A*>(partial_raw);
  A* partial_b = partial_w + n;
  auto weight = [&](int64_t i) { return w != nullptr ? widen(w[i]) : A(1); };
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    const T* g = static_cast<const T*>(args.grad_out) + row * n;
    T* gx = static_cast<T*>(args.grad_x) + row * n;
    A mean, rstd;
    moments(x, n, args.eps, mean, rstd);
    const A mean_gw = lane_sum<A>(n, [&](int64_t i) { return widen(g[i]) * weight(i); }) / A(n);
    const A mean_gw_xhat = lane_sum<A>(n,
                                       [&](int64_t i) {
                                         return widen(g[i]) * weight(i) *
                                                ((widen(x[i]) - mean) * rstd);
                                       }) /
                           A(n);
    for (int64_t i = 0; i < n; ++i) {
      const A gi = widen(g[i]);
      const A xhat = (widen(x[i]) - mean) * rstd;
      gx[i] = narrow<T>(rstd * (gi * weight(i) - mean_gw - xhat * mean_gw_xhat));
      partial_w[i] += gi * xhat;
      partial_b[i] += gi;
    }
  }
}

template <typename T>
void reduce_columns(const void* partial_raw, int64_t blocks, int64_t n, void* grad_w_raw,
                    void* grad_b_raw, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const A* partial = static_cast<const A*>(partial_raw);
  T* grad_w = static_cast<T*>(grad_w_raw);
  T* grad_b = static_cast<T*>(grad_b_raw);
  for (int64_t c = begin; c < end; ++c) {
    A total_w = 0;
    A total_b = 0;
    for (int64_t k = 0; k < blocks; ++k) {
      total_w += partial[2 * k * n + c];
      total_b += partial[(2 * k + 1) * n + c];
    }
    grad_w[c] = narrow<T>(total_w);
    grad_b[c] = narrow<T>(total_b);
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
#ifdef LAYERNORM_BF16_ROWS
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

void reduce(const void* partial, int64_t blocks, int64_t hidden, void* grad_w, void* grad_b,
            DType dtype, int64_t begin, int64_t end) {
  with_dtype(dtype, [&](auto tag) {
    reduce_columns<decltype(tag)>(partial, blocks, hidden, grad_w, grad_b, begin, end);
  });
}

#define LAYERNORM_STRINGIFY_(x) #x
#define LAYERNORM_STRINGIFY(x) LAYERNORM_STRINGIFY_(x)

constexpr KernelTable kTable{LAYERNORM_STRINGIFY(LAYERNORM_CAPABILITY), &forward, &backward,
                             &reduce};

}  // namespace

const KernelTable* LAYERNORM_KERNEL_TABLE() {
  return &kTable;
}

}  // namespace layernorm_cpu
