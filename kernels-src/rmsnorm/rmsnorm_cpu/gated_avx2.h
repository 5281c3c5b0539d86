// The gated norm's float32 and bf16 rows with AVX2 + FMA intrinsics (forward,
// and the backward of the gate-after-norm order), for the
// AVX2 and AVX-512 copies of the loops (RMSNORM_GATED_AVX2). The plain loop
// of kernels_impl.h (gated_rows) widens the row into a scratch row, runs the
// activation as its own pass and then reduces and scales: four trips through
// memory per element and GCC's vectorised exp without FMAs. Here a group is
// read twice from L1 (the sum of squares, then the scaled output, with the
// gate's activation computed in registers on the way out), bf16 is widened
// and rounded in registers, and exp is one range reduction plus a degree-6
// polynomial in FMAs (~1 ulp over the range the activation uses).
//
// The results are the plain loop's within float rounding (FMAs and the order
// of the lanes differ), not bit for bit; the tests hold every copy to the
// same tolerance against float64. The AVX-512 copies run these 256-bit rows
// too: they are the ones tested on AVX2 machines, and the row of a gated
// delta net (128 values) is four vectors of eight either way.
#pragma once

#include "kernels.h"
#include "scalar.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace rmsnorm_cpu {
namespace {
namespace gated_avx2 {

// ---- 8 floats: loads, stores, exp and the activations ----------------------

inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
// bf16 -> float is a 16-bit shift of the bits.
inline __m256 load8(const bf16_t* p) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

inline void store8(float* p, __m256 v) {
  _mm256_storeu_ps(p, v);
}
// float -> bf16 as narrow<bf16_t> rounds it: to nearest even, NaN to 0x7FC0.
inline void store8(bf16_t* p, __m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd);
  r = _mm256_srli_epi32(r, 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
  // Values fit 16 bits, so the saturating pack is a plain narrowing; it works
  // per 128-bit half, hence the two halves as its two inputs.
  const __m128i packed =
      _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

// exp(x) = 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts,
// so r is exact to float precision), p the degree-6 Taylor polynomial of
// e^r on |r| <= ln2 / 2 (truncation ~1.2e-7 relative). x is clamped to
// [-87, 88] so 2^n is a normal float; a NaN passes the clamps (max/min return
// their second operand for a NaN) and comes out NaN.
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
  x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// silu(g) = g / (1 + e^-g), sigmoid(g) = 1 / (1 + e^-g): one exp and one divide.
template <Activation kAct>
inline __m256 act8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 denom = _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)));
  return _mm256_div_ps(kAct == Activation::Silu ? g : one, denom);
}

// The same in scalar code, for the columns past the last full vector.
template <Activation kAct>
inline float act1(float g) {
  const float denom = 1.0f + exp_approx(-g);
  return (kAct == Activation::Silu ? g : 1.0f) / denom;
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// sum of v[i]^2 over [0, n): four accumulators (32 lanes) so the FMAs pipeline.
inline float sum_squares(const float* v, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 x = _mm256_loadu_ps(v + i + 8 * k);
      acc[k] = _mm256_fmadd_ps(x, x, acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i);
    acc[0] = _mm256_fmadd_ps(x, x, acc[0]);
  }
  float total = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) {
    total += v[i] * v[i];
  }
  return total;
}
inline float sum_squares(const bf16_t* v, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 x = load8(v + i + 8 * k);
      acc[k] = _mm256_fmadd_ps(x, x, acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 x = load8(v + i);
    acc[0] = _mm256_fmadd_ps(x, x, acc[0]);
  }
  float total = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) {
    const float x = widen(v[i]);
    total += x * x;
  }
  return total;
}

inline float rstd(float sum_sq, int64_t n, double eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + static_cast<float>(eps));
}

// Norm first (gated delta nets, Falcon-H1's default): y = w * x * r * act(g),
// or without a gate y = w * x * r; the group is read once for r and once more
// (from L1) for y.
template <typename T, Activation kAct, bool kGated>
inline void group_norm_first(const T* x, const T* g, const T* w, T* out, int64_t n,
                             double eps) {
  const float r1 = rstd(sum_squares(x, n), n, eps);
  const __m256 r = _mm256_set1_ps(r1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 y = _mm256_mul_ps(load8(w + i), _mm256_mul_ps(load8(x + i), r));
    if constexpr (kGated) {
      y = _mm256_mul_ps(y, act8<kAct>(load8(g + i)));
    }
    store8(out + i, y);
  }
  for (; i < n; ++i) {
    float y = widen(w[i]) * (widen(x[i]) * r1);
    if constexpr (kGated) {
      y *= act1<kAct>(widen(g[i]));
    }
    out[i] = narrow<T>(y);
  }
}

// Gate first (Falcon-H1 with norm_before_gate=False): v = x * act(g) into the
// float scratch `v` (the activation runs once), then y = w * v * r(v).
template <typename T, Activation kAct>
inline void group_gate_first(const T* x, const T* g, const T* w, T* out, int64_t n, double eps,
                             float* v) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(v + i, _mm256_mul_ps(load8(x + i), act8<kAct>(load8(g + i))));
  }
  for (; i < n; ++i) {
    v[i] = widen(x[i]) * act1<kAct>(widen(g[i]));
  }
  const float r1 = rstd(sum_squares(v, n), n, eps);
  const __m256 r = _mm256_set1_ps(r1);
  for (i = 0; i + 8 <= n; i += 8) {
    store8(out + i, _mm256_mul_ps(load8(w + i), _mm256_mul_ps(_mm256_loadu_ps(v + i), r)));
  }
  for (; i < n; ++i) {
    out[i] = narrow<T>(widen(w[i]) * (v[i] * r1));
  }
}

template <typename T, Activation kAct>
void rows(const GatedArgs& args, int64_t begin, int64_t end) {
  const int64_t n = args.hidden;
  const int64_t group = args.group;
  const T* w = static_cast<const T*>(args.weight);
  const bool gated = args.gate != nullptr;
  std::vector<float> scratch(gated && !args.norm_before_gate ? static_cast<size_t>(group) : 0);
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(args.x) + row * n;
    const T* g = gated ? static_cast<const T*>(args.gate) + row * n : nullptr;
    T* out = static_cast<T*>(args.out) + row * n;
    for (int64_t start = 0; start < n; start += group) {
      if (!gated) {
        group_norm_first<T, kAct, false>(x + start, nullptr, w + start, out + start, group,
                                         args.eps);
      } else if (args.norm_before_gate) {
        group_norm_first<T, kAct, true>(x + start, g + start, w + start, out + start, group,
                                        args.eps);
      } else {
        group_gate_first<T, kAct>(x + start, g + start, w + start, out + start, group, args.eps,
                                  scratch.data());
      }
    }
  }
}

// The float32 and bf16 rows; false for the dtypes left to the plain loop.
inline bool forward(const GatedArgs& args, int64_t begin, int64_t end) {
  const bool silu = args.activation == Activation::Silu;
  if (args.dtype == DType::Float) {
    silu ? rows<float, Activation::Silu>(args, begin, end)
         : rows<float, Activation::Sigmoid>(args, begin, end);
    return true;
  }
  if (args.dtype == DType::BFloat16) {
    silu ? rows<bf16_t, Activation::Silu>(args, begin, end)
         : rows<bf16_t, Activation::Sigmoid>(args, begin, end);
    return true;
  }
  return false;
}

// ---- backward, norm first (the gated delta nets' order) ----------------------
//
// Per group, r = rstd(x), s = sigmoid(g), a = g s (silu) or s, a' = s (1 + g (1 - s))
// or s (1 - s), u = dy * w * a:
//   dgate = dy * w * x * r * a',  dw += dy * x * r * a,
//   dx = r * u - x * r^3 * mean(u * x).
// Three trips through the group in L1: the sum of squares, then (with the
// activation in registers) dgate, the weight's row sums and u into the
// scratch `u`, then dx.
template <typename T, Activation kAct>
inline void group_backward(const T* x, const T* g, const T* dy, const T* w, T* dx, T* dg,
                           float* partial, int64_t n, double eps, float* u) {
  const float r1 = rstd(sum_squares(x, n), n, eps);
  const __m256 r = _mm256_set1_ps(r1);
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 dot = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = load8(x + i);
    const __m256 gv = load8(g + i);
    const __m256 dyv = load8(dy + i);
    const __m256 s = act8<Activation::Sigmoid>(gv);
    const __m256 one_minus = _mm256_sub_ps(one, s);
    __m256 a = s;
    __m256 da = _mm256_mul_ps(s, one_minus);
    if constexpr (kAct == Activation::Silu) {
      a = _mm256_mul_ps(gv, s);
      da = _mm256_mul_ps(s, _mm256_fmadd_ps(gv, one_minus, one));
    }
    const __m256 u0 = _mm256_mul_ps(dyv, load8(w + i));
    const __m256 xr = _mm256_mul_ps(xv, r);
    store8(dg + i, _mm256_mul_ps(_mm256_mul_ps(u0, xr), da));
    _mm256_storeu_ps(partial + i,
                     _mm256_fmadd_ps(_mm256_mul_ps(dyv, xr), a, _mm256_loadu_ps(partial + i)));
    const __m256 uv = _mm256_mul_ps(u0, a);
    _mm256_storeu_ps(u + i, uv);
    dot = _mm256_fmadd_ps(uv, xv, dot);
  }
  float dot1 = hsum(dot);
  for (; i < n; ++i) {
    const float xi = widen(x[i]);
    const float gi = widen(g[i]);
    const float di = widen(dy[i]);
    const float s = 1.0f / (1.0f + exp_approx(-gi));
    const float a = kAct == Activation::Silu ? gi * s : s;
    const float da = kAct == Activation::Silu ? s * (1.0f + gi * (1.0f - s)) : s * (1.0f - s);
    const float u0 = di * widen(w[i]);
    dg[i] = narrow<T>(u0 * (xi * r1) * da);
    partial[i] += di * (xi * r1) * a;
    u[i] = u0 * a;
    dot1 += u[i] * xi;
  }
  const float coef1 = r1 * r1 * r1 * dot1 / static_cast<float>(n);
  const __m256 coef = _mm256_set1_ps(coef1);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 xc = _mm256_mul_ps(load8(x + i), coef);
    store8(dx + i, _mm256_fmsub_ps(r, _mm256_loadu_ps(u + i), xc));
  }
  for (; i < n; ++i) {
    dx[i] = narrow<T>(r1 * u[i] - widen(x[i]) * coef1);
  }
}

template <typename T, Activation kAct>
void backward_rows(const GatedBackwardArgs& args, int64_t begin, int64_t end, float* partial) {
  const int64_t n = args.hidden;
  const int64_t group = args.group;
  const T* w = static_cast<const T*>(args.weight);
  std::vector<float> u(static_cast<size_t>(group));
  for (int64_t row = begin; row < end; ++row) {
    const int64_t at = row * n;
    const T* x = static_cast<const T*>(args.x) + at;
    const T* g = static_cast<const T*>(args.gate) + at;
    const T* dy = static_cast<const T*>(args.grad_out) + at;
    T* dx = static_cast<T*>(args.grad_x) + at;
    T* dg = static_cast<T*>(args.grad_gate) + at;
    for (int64_t start = 0; start < n; start += group) {
      group_backward<T, kAct>(x + start, g + start, dy + start, w + start, dx + start,
                              dg + start, partial + start, group, args.eps, u.data());
    }
  }
}

// The float32 and bf16 rows of a gated norm-first backward; false for what is
// left to the plain loop (other dtypes, no gate, the gate first).
inline bool backward(const GatedBackwardArgs& args, int64_t begin, int64_t end, void* partial) {
  if (args.gate == nullptr || !args.norm_before_gate) {
    return false;
  }
  float* acc = static_cast<float*>(partial);
  const bool silu = args.activation == Activation::Silu;
  if (args.dtype == DType::Float) {
    silu ? backward_rows<float, Activation::Silu>(args, begin, end, acc)
         : backward_rows<float, Activation::Sigmoid>(args, begin, end, acc);
    return true;
  }
  if (args.dtype == DType::BFloat16) {
    silu ? backward_rows<bf16_t, Activation::Silu>(args, begin, end, acc)
         : backward_rows<bf16_t, Activation::Sigmoid>(args, begin, end, acc);
    return true;
  }
  return false;
}

}  // namespace gated_avx2
}  // namespace
}  // namespace rmsnorm_cpu
