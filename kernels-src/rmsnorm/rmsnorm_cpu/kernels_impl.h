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

#ifdef RMSNORM_GATED_AVX2
#include "gated_avx2.h"
#endif

#ifdef RMSNORM_DOTS_AVX2
#include "dots_avx2.h"
#endif

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

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

// The gated norm (GatedArgs), one row at a time in float: the row's values
// (gated first where the gate comes before the norm) are widened once into a
// scratch row, then each group is reduced and scaled. The activation runs in
// separate straight loops over the row so the compiler vectorizes them.
template <typename T>
void gated_rows(const GatedArgs& args, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const int64_t group = args.group;
  const T* w = static_cast<const T*>(args.weight);
  std::vector<A> wide(static_cast<size_t>(n));
  std::vector<A> act(args.gate != nullptr ? static_cast<size_t>(n) : 0);
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    T* out = static_cast<T*>(args.out) + row * n;
    A* v = wide.data();
    for (int64_t i = 0; i < n; ++i) {
      v[i] = widen(x[i]);
    }
    A* a = act.data();
    if (args.gate != nullptr) {
      const T* g = static_cast<const T*>(args.gate) + row * n;
      if (args.activation == Activation::Silu) {
        for (int64_t i = 0; i < n; ++i) {
          a[i] = silu(widen(g[i]));
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          a[i] = A(1) / (A(1) + exp_approx(-widen(g[i])));
        }
      }
      if (!args.norm_before_gate) {
        for (int64_t i = 0; i < n; ++i) {
          v[i] = v[i] * a[i];
        }
      }
    }
    const bool gate_after = args.gate != nullptr && args.norm_before_gate;
    for (int64_t start = 0; start < n; start += group) {
      const A* vg = v + start;
      const A r = rstd_of<T>(lane_sum<A>(group, [&](int64_t i) { return vg[i] * vg[i]; }), group,
                             args.eps);
      const T* wg = w + start;
      T* og = out + start;
      if (gate_after) {
        const A* ag = a + start;
        for (int64_t i = 0; i < group; ++i) {
          og[i] = narrow<T>(widen(wg[i]) * (vg[i] * r) * ag[i]);
        }
      } else {
        for (int64_t i = 0; i < group; ++i) {
          og[i] = narrow<T>(widen(wg[i]) * (vg[i] * r));
        }
      }
    }
  }
}

// The gated norm's backward, per group of G columns, r = rstd(v):
//   norm first:  y = w * v * r * a,  v = x, a = act(gate) (1 without a gate);
//   gate first:  y = w * v * r,      v = x * a.
// With u = dy * w (* a when the gate comes after the norm),
//   dL/dv = r * u - v * r^3 * mean(u * v)   (the RMSNorm backward),
// then dx = dL/dv (* a when the gate comes first), dgate = dy * w * v * r *
// act'(gate) (norm first) or dL/dv * x * act'(gate) (gate first), and
// dw = dy * v * r (* a, norm first), summed over rows into `partial`.
// act' = s (1 + g (1 - s)) for silu, s (1 - s) for sigmoid, s = sigmoid(g).
// The row is widened once into scratch rows, so the loops are straight and
// GCC vectorizes them.
template <typename T>
void gated_backward_rows(const GatedBackwardArgs& args, int64_t begin, int64_t end,
                         void* partial_raw) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const int64_t group = args.group;
  const bool gated = args.gate != nullptr;
  const bool before = args.norm_before_gate;
  const bool silu_gate = args.activation == Activation::Silu;
  const T* w = static_cast<const T*>(args.weight);
  A* partial = static_cast<A*>(partial_raw);
  std::vector<A> scratch(static_cast<size_t>(4 * n));
  A* v = scratch.data();      // the normalised values (x, or x * a)
  A* a = v + n;               // act(gate)
  A* da = a + n;              // act'(gate)
  A* u = da + n;              // dy * w (* a, norm first); then dL/dv
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    const T* dy = static_cast<const T*>(args.grad_out) + row * n;
    T* dx = static_cast<T*>(args.grad_x) + row * n;
    if (gated) {
      const T* g = static_cast<const T*>(args.gate) + row * n;
      for (int64_t i = 0; i < n; ++i) {
        const A gi = widen(g[i]);
        const A s = A(1) / (A(1) + exp_approx(-gi));
        a[i] = silu_gate ? gi * s : s;
        da[i] = silu_gate ? s * (A(1) + gi * (A(1) - s)) : s * (A(1) - s);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      v[i] = widen(x[i]);
    }
    if (gated && !before) {
      for (int64_t i = 0; i < n; ++i) {
        v[i] = v[i] * a[i];
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      u[i] = widen(dy[i]) * widen(w[i]);
    }
    if (gated && before) {
      T* dg = static_cast<T*>(args.grad_gate) + row * n;
      for (int64_t start = 0; start < n; start += group) {
        const A* vg = v + start;
        const A r = rstd_of<T>(lane_sum<A>(group, [&](int64_t i) { return vg[i] * vg[i]; }),
                               group, args.eps);
        for (int64_t i = start; i < start + group; ++i) {
          dg[i] = narrow<T>(u[i] * v[i] * r * da[i]);
          partial[i] += widen(dy[i]) * v[i] * r * a[i];
          u[i] = u[i] * a[i];
        }
        const A dot = lane_sum<A>(group, [&](int64_t i) { return u[start + i] * vg[i]; });
        const A coef = r * r * r * dot / A(group);
        for (int64_t i = start; i < start + group; ++i) {
          dx[i] = narrow<T>(r * u[i] - v[i] * coef);
        }
      }
      continue;
    }
    for (int64_t start = 0; start < n; start += group) {
      const A* vg = v + start;
      const A r = rstd_of<T>(lane_sum<A>(group, [&](int64_t i) { return vg[i] * vg[i]; }),
                             group, args.eps);
      const A dot = lane_sum<A>(group, [&](int64_t i) { return u[start + i] * vg[i]; });
      const A coef = r * r * r * dot / A(group);
      for (int64_t i = start; i < start + group; ++i) {
        partial[i] += widen(dy[i]) * v[i] * r;
        u[i] = r * u[i] - v[i] * coef;  // dL/dv
      }
    }
    if (!gated) {
      for (int64_t i = 0; i < n; ++i) {
        dx[i] = narrow<T>(u[i]);
      }
      continue;
    }
    T* dg = static_cast<T*>(args.grad_gate) + row * n;
    for (int64_t i = 0; i < n; ++i) {
      dx[i] = narrow<T>(u[i] * a[i]);
      dg[i] = narrow<T>(u[i] * widen(x[i]) * da[i]);
    }
  }
}

// ---- SwiGLU MLP for a few rows (MlpArgs) -----------------------------------
//
// Matrix-vector products that stream each weight row once for all rows of x:
// a decode step reads ~70 MB of MLP weights per layer for 2 flops per weight
// and row, so the memory stream is the cost. Each weight comes from memory once
// per call: the plain loop (dot_rows) multiplies a weight row by each row of x in
// turn while the row is in cache; dots_avx2.h reads four rows side by side.

// Weight rows per pass: a pass reads them side by side, so several memory streams
// are in flight (dots_avx2.h says what one row at a time cost).
constexpr int64_t kWeightRows = 4;

// Whether this copy multiplies bf16 by bf16 in hardware (VDPBF16PS): x is then
// read as bf16, not widened first.
#ifdef RMSNORM_BF16_DOT
template <typename T>
constexpr bool kPairDots = std::is_same_v<T, bf16_t>;
#else
template <typename T>
constexpr bool kPairDots = false;
#endif

// out[r * rows + m] = w_r . x_m for the `count` (<= kWeightRows) weight rows from
// `w` (w_r = w + r * n) and every row of x (`rows` of `n` values each): `raw` in the
// dtype, `wide` the same values widened (empty where kPairDots reads `raw`). Each
// sum with lane_sum's partial sums (products rounded, then added: no FMA), so every
// copy of the loops gives the same bits (VDPBF16PS excepted, see bf16_rows.h).
template <typename T>
inline void dot_rows(const T* w, int64_t count, const T* raw, const std::vector<acc_t<T>>& wide,
                     int64_t rows, int64_t n, acc_t<T>* out) {
#ifdef RMSNORM_BF16_DOT
  if constexpr (kPairDots<T>) {
    for (int64_t r = 0; r < count; ++r) {
      float sums[bf16_rows::kPairRows];
      for (int64_t m0 = 0; m0 < rows; m0 += bf16_rows::kPairRows) {
        const int64_t part = std::min(bf16_rows::kPairRows, rows - m0);
        bf16_rows::pair_dots(w + r * n, raw + m0 * n, n, part, n, sums);
        for (int64_t m = 0; m < part; ++m) {
          out[r * rows + m0 + m] = sums[m];
        }
      }
    }
    return;
  }
#endif
#ifdef RMSNORM_DOTS_AVX2
  if constexpr (dots_avx2::kHandles<T>) {
    return dots_avx2::dots(w, count, wide.data(), rows, n, out);
  }
#endif
  for (int64_t r = 0; r < count; ++r) {
    const T* wr = w + r * n;
    for (int64_t m = 0; m < rows; ++m) {
      const acc_t<T>* xm = wide.data() + m * n;
      out[r * rows + m] = lane_sum<acc_t<T>>(n, [&](int64_t i) { return widen(wr[i]) * xm[i]; });
    }
  }
}

// `count` values of x widened to the compute type, unless kPairDots reads them as they are.
template <typename T>
inline std::vector<acc_t<T>> widened(const T* x, int64_t count) {
  std::vector<acc_t<T>> wide;
  if (!kPairDots<T>) {
    wide.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      wide[i] = widen(x[i]);
    }
  }
  return wide;
}

// act[m, j] = round(silu(round(x_m . w_gate[j])) * round(x_m . w_up[j])) for j in [begin, end).
template <typename T>
void mlp_gate_up_rows(const MlpArgs& args, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const int64_t n = args.hidden;
  const int64_t rows = args.rows;
  const T* x = static_cast<const T*>(args.x);
  const std::vector<A> xs = widened(x, rows * n);  // once per task, not per weight row
  const T* w_gate = static_cast<const T*>(args.w_gate);
  const T* w_up = static_cast<const T*>(args.w_up);
  T* act = static_cast<T*>(args.act);
  std::vector<A> gate(static_cast<size_t>(kWeightRows * rows));
  std::vector<A> up(static_cast<size_t>(kWeightRows * rows));
  for (int64_t j = begin; j < end; j += kWeightRows) {
    const int64_t count = std::min(kWeightRows, end - j);
    dot_rows(w_gate + j * n, count, x, xs, rows, n, gate.data());
    dot_rows(w_up + j * n, count, x, xs, rows, n, up.data());
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t m = 0; m < rows; ++m) {
        const A g = widen(narrow<T>(gate[r * rows + m]));
        act[m * args.inter + j + r] = narrow<T>(silu(g) * widen(narrow<T>(up[r * rows + m])));
      }
    }
  }
}

// store(m, j, x_m . w[j]) for j in [begin, end) and every row m of x (`rows` rows of `n`
// values; w: [features, n]), each weight row streamed once for all rows: the product
// behind mlp_down and linear, which differ only in what they add and where they round.
template <typename T, typename Store>
inline void project_rows(const T* x, const T* w, int64_t rows, int64_t n, int64_t begin,
                         int64_t end, const Store& store) {
  using A = acc_t<T>;
  const std::vector<A> xs = widened(x, rows * n);  // once per task, not per weight row
  std::vector<A> sums(static_cast<size_t>(kWeightRows * rows));
  for (int64_t j = begin; j < end; j += kWeightRows) {
    const int64_t count = std::min(kWeightRows, end - j);
    dot_rows(w + j * n, count, x, xs, rows, n, sums.data());
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t m = 0; m < rows; ++m) {
        store(m, j + r, sums[r * rows + m]);
      }
    }
  }
}

// out[m, j] = round(act_m . w_down[j]) (+ residual[m, j], rounded) for j in [begin, end).
template <typename T>
void mlp_down_rows(const MlpArgs& args, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const T* residual = static_cast<const T*>(args.residual);
  T* out = static_cast<T*>(args.out);
  project_rows(static_cast<const T*>(args.act), static_cast<const T*>(args.w_down), args.rows,
               args.inter, begin, end, [&](int64_t m, int64_t j, A sum) {
                 const int64_t at = m * args.hidden + j;
                 const T value = narrow<T>(sum);
                 out[at] = residual == nullptr ? value
                                               : narrow<T>(widen(residual[at]) + widen(value));
               });
}

// out[m, j] = round(x_m . w[j] + bias[j] + residual[m, j]) for j in [begin, end): the
// sum in the compute type, rounded once (LinearArgs).
template <typename T>
void linear_rows(const LinearArgs& args, int64_t begin, int64_t end) {
  using A = acc_t<T>;
  const T* bias = static_cast<const T*>(args.bias);
  const T* residual = static_cast<const T*>(args.residual);
  T* out = static_cast<T*>(args.out);
  project_rows(static_cast<const T*>(args.x), static_cast<const T*>(args.weight), args.rows,
               args.in, begin, end, [&](int64_t m, int64_t j, A sum) {
                 const int64_t at = m * args.features + j;
                 if (bias != nullptr) {
                   sum += widen(bias[j]);
                 }
                 if (residual != nullptr) {
                   sum += widen(residual[at]);
                 }
                 out[at] = narrow<T>(sum);
               });
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

void mlp_gate_up(const MlpArgs& args, int64_t begin, int64_t end) {
  with_dtype(args.dtype, [&](auto tag) { mlp_gate_up_rows<decltype(tag)>(args, begin, end); });
}

void mlp_down(const MlpArgs& args, int64_t begin, int64_t end) {
  with_dtype(args.dtype, [&](auto tag) { mlp_down_rows<decltype(tag)>(args, begin, end); });
}

void linear(const LinearArgs& args, int64_t begin, int64_t end) {
  with_dtype(args.dtype, [&](auto tag) { linear_rows<decltype(tag)>(args, begin, end); });
}

void gated(const GatedArgs& args, int64_t begin, int64_t end) {
#ifdef RMSNORM_GATED_AVX2
  if (gated_avx2::forward(args, begin, end)) {
    return;
  }
#endif
  with_dtype(args.dtype, [&](auto tag) { gated_rows<decltype(tag)>(args, begin, end); });
}

void gated_backward(const GatedBackwardArgs& args, int64_t begin, int64_t end, void* partial) {
#ifdef RMSNORM_GATED_AVX2
  if (gated_avx2::backward(args, begin, end, partial)) {
    return;
  }
#endif
  with_dtype(args.dtype,
             [&](auto tag) { gated_backward_rows<decltype(tag)>(args, begin, end, partial); });
}

#define RMSNORM_STRINGIFY_(x) #x
#define RMSNORM_STRINGIFY(x) RMSNORM_STRINGIFY_(x)

constexpr KernelTable kTable{RMSNORM_STRINGIFY(RMSNORM_CAPABILITY),
                             &forward,
                             &backward,
                             &reduce,
                             &silu_mul,
                             &mlp_gate_up,
                             &mlp_down,
                             &linear,
                             &gated,
                             &gated_backward};

}  // namespace

const KernelTable* RMSNORM_KERNEL_TABLE() {
  return &kTable;
}

}  // namespace rmsnorm_cpu
