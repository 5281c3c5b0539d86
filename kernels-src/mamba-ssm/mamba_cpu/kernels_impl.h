// The loops behind every CPU op, written once and compiled once per
// instruction set: the including file (kernels_<cap>.cpp) chooses the target
// and defines MAMBA_CPU_TABLE, the name of the table this copy exports.
// Everything else is in an anonymous namespace, so the copies share no symbol.
//
// All arithmetic is float; bf16 values are widened on load and rounded once on
// store. The scans keep each head's (or channel's) state in a thread-local
// buffer for the whole sequence: on a CPU the state of one Mamba-2 head
// (64 x 128 floats) stays in L1/L2, so walking the recurrence token by token
// reads every input once and does ~4 flops per state entry per token, less
// than the SSD chunked form's matmuls, which pay off on tensor cores.
#pragma once

#include "kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef MAMBA_HW_BF16
#include <immintrin.h>
#endif

#ifndef MAMBA_CPU_TABLE
#error "define MAMBA_CPU_TABLE before including kernels_impl.h"
#endif

namespace mamba_ssm {
namespace {

using bf16_bits = uint16_t;

inline float bf16_to_float(bf16_bits v) {
  const uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even, as torch does; NaN stays a (quiet) NaN.
inline bf16_bits float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<bf16_bits>((u >> 16) | 0x40u);
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const bf16_bits* p, int64_t i) { return bf16_to_float(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(bf16_bits* p, int64_t i, float v) { p[i] = float_to_bf16(v); }

template <typename T>
inline void load_row(float* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load(src, i);
}

inline void store_row(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

inline void store_row(bf16_bits* dst, const float* src, int64_t n) {
  int64_t i = 0;
#ifdef MAMBA_HW_BF16
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    std::memcpy(dst + i, &v, sizeof v);
  }
#endif
  for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

// exp(x) in float without a libm call, so loops that use it vectorize (calls to
// std::exp, fminf or floorf keep GCC from vectorizing them; the SiLU of the conv
// took 18x the time of the conv itself with std::exp). Range reduction by ln 2
// (round half away from zero through an int conversion) and a degree-6 Taylor
// polynomial on |r| <= ln(2)/2: relative error below 2e-7. NaN stays NaN.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float y = x * 1.44269504f;
  const int32_t ni = static_cast<int32_t>(y + (y >= 0.0f ? 0.5f : -0.5f));
  const float n = static_cast<float>(ni);
  float r = x - n * 0.693145752f;
  r = r - n * 1.42860677e-6f;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6.0f + r * (1.0f / 24.0f +
                                                         r * (1.0f / 120.0f + r * (1.0f / 720.0f))))));
  const int32_t bits = (ni + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float silu(float v) { return v / (1.0f + exp_approx(-v)); }

// A per-thread scratch buffer of at least n floats (reused across calls).
inline float* scratch(int slot, int64_t n) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& buf = buffers[slot];
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// ---- causal conv1d -------------------------------------------------------

// Channel-last x (x_sd == o_sd == 1): one item is one (b, l) row of channels,
// so the inner loops run over contiguous channels.
template <typename T>
void conv_rows(const ConvArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const int64_t D = a.dim, K = a.width;
  float* acc = scratch(0, D);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / a.len, l = item % a.len;
    for (int64_t d = 0; d < D; ++d) acc[d] = a.bias ? a.bias[d] : 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t src = l - (K - 1) + k;
      if (src < 0) continue;
      const T* xr = x + b * a.x_sb + src * a.x_sl;
      const float* wk = a.w + k * D;
      for (int64_t d = 0; d < D; ++d) acc[d] += wk[d] * load(xr, d);
    }
    if (a.silu) {
      for (int64_t d = 0; d < D; ++d) acc[d] = silu(acc[d]);
    }
    store_row(out + b * a.o_sb + l * a.o_sl, acc, D);
  }
}

// Any other layout: one item is one (b, d) channel, walked along the sequence.
template <typename T>
void conv_channels(const ConvArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const int64_t D = a.dim, K = a.width, L = a.len;
  float* row = scratch(0, L + K);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / D, d = item % D;
    const T* xc = x + b * a.x_sb + d * a.x_sd;
    for (int64_t i = 0; i < K - 1; ++i) row[i] = 0.0f;
    for (int64_t l = 0; l < L; ++l) row[K - 1 + l] = load(xc, l * a.x_sl);
    const float bias = a.bias ? a.bias[d] : 0.0f;
    T* oc = out + b * a.o_sb + d * a.o_sd;
    for (int64_t l = 0; l < L; ++l) {
      float acc = bias;
      for (int64_t k = 0; k < K; ++k) acc += a.w[k * D + d] * row[l + k];
      store(oc, l * a.o_sl, a.silu ? silu(acc) : acc);
    }
  }
}

template <typename T>
void conv_t(const ConvArgs& a, int64_t begin, int64_t end) {
  if (a.x_sd == 1 && a.o_sd == 1) {
    conv_rows<T>(a, begin, end);
  } else {
    conv_channels<T>(a, begin, end);
  }
}

void conv(const ConvArgs& a, int64_t begin, int64_t end) {
  if (a.dtype == DType::BFloat16) {
    conv_t<bf16_bits>(a, begin, end);
  } else {
    conv_t<float>(a, begin, end);
  }
}

template <typename T>
void conv_update_t(const ConvUpdateArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  T* state = static_cast<T*>(a.state);
  T* out = static_cast<T*>(a.out);
  const int64_t D = a.dim, K = a.width, L = a.len, S = a.state_len;
  float* seq = scratch(0, S + L);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / D, d = item % D;
    T* sc = state + b * a.s_sb + d * a.s_sd;
    const T* xc = x + b * a.x_sb + d * a.x_sd;
    for (int64_t i = 0; i < S; ++i) seq[i] = load(sc, i * a.s_sl);
    for (int64_t l = 0; l < L; ++l) seq[S + l] = load(xc, l * a.x_sl);
    const float bias = a.bias ? a.bias[d] : 0.0f;
    T* oc = out + b * a.o_sb + d * a.o_sd;
    for (int64_t l = 0; l < L; ++l) {
      float acc = bias;
      for (int64_t k = 0; k < K; ++k) acc += a.w[k * D + d] * seq[S + l - (K - 1) + k];
      store(oc, l * a.o_sl, a.silu ? silu(acc) : acc);
    }
    for (int64_t i = 0; i < S; ++i) store(sc, i * a.s_sl, seq[L + i]);
  }
}

void conv_update(const ConvUpdateArgs& a, int64_t begin, int64_t end) {
  if (a.dtype == DType::BFloat16) {
    conv_update_t<bf16_bits>(a, begin, end);
  } else {
    conv_update_t<float>(a, begin, end);
  }
}

// ---- Mamba-2 -------------------------------------------------------------

// One token for one head: S = da S + xd B^T, y = S C (+ D x, * silu(z)).
// Fused so each state row is read and written once per token.
inline float state_row_step(float* s, const float* Bf, const float* Cf, float da, float xd,
                            int64_t N) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t n = 0; n < N; ++n) {
    const float v = da * s[n] + xd * Bf[n];
    s[n] = v;
    acc += v * Cf[n];
  }
  return acc;
}

template <typename T>
void scan_t(const ScanArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  const T* Bm = static_cast<const T*>(a.B);
  const T* Cm = static_cast<const T*>(a.C);
  const T* z = static_cast<const T*>(a.z);
  T* y = static_cast<T*>(a.y);
  const int64_t H = a.heads, P = a.headdim, N = a.dstate, L = a.len;
  const int64_t per_group = H / a.groups;
  float* S = scratch(0, P * N);
  float* Bf = scratch(1, N);
  float* Cf = scratch(2, N);
  float* yrow = scratch(3, P);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / H, h = item % H, g = h / per_group;
    if (a.init) {
      std::memcpy(S, a.init + item * P * N, static_cast<size_t>(P * N) * sizeof(float));
    } else {
      std::memset(S, 0, static_cast<size_t>(P * N) * sizeof(float));
    }
    const float Ah = a.A[h];
    const float* Dh = a.D ? a.D + h * P : nullptr;
    for (int64_t t = 0; t < L; ++t) {
      const float dtv = a.dt[(b * L + t) * H + h];
      const float da = exp_approx(dtv * Ah);
      load_row(Bf, Bm + b * a.B_sb + t * a.B_sl + g * a.B_sg, N);
      load_row(Cf, Cm + b * a.C_sb + t * a.C_sl + g * a.C_sg, N);
      const T* xr = x + b * a.x_sb + t * a.x_sl + h * a.x_sh;
      for (int64_t p = 0; p < P; ++p) {
        const float xv = load(xr, p);
        float yv = state_row_step(S + p * N, Bf, Cf, da, xv * dtv, N);
        if (Dh) yv += Dh[p] * xv;
        yrow[p] = yv;
      }
      if (z) {
        const T* zr = z + b * a.z_sb + t * a.z_sl + h * a.z_sh;
        for (int64_t p = 0; p < P; ++p) yrow[p] *= silu(load(zr, p));
      }
      store_row(y + ((b * L + t) * H + h) * P, yrow, P);
    }
    if (a.final_state) {
      std::memcpy(a.final_state + item * P * N, S, static_cast<size_t>(P * N) * sizeof(float));
    }
  }
}

void scan(const ScanArgs& a, int64_t begin, int64_t end) {
  if (a.dtype == DType::BFloat16) {
    scan_t<bf16_bits>(a, begin, end);
  } else {
    scan_t<float>(a, begin, end);
  }
}

template <typename T, typename ST>
void step_t(const StepArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  const T* Bm = static_cast<const T*>(a.B);
  const T* Cm = static_cast<const T*>(a.C);
  const T* z = static_cast<const T*>(a.z);
  ST* state = static_cast<ST*>(a.state);
  T* out = static_cast<T*>(a.out);
  const int64_t H = a.heads, P = a.headdim, N = a.dstate;
  const int64_t per_group = H / a.groups;
  float* s = scratch(0, N);
  float* Bf = scratch(1, N);
  float* Cf = scratch(2, N);
  float* orow = scratch(3, P);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / H, h = item % H, g = h / per_group;
    const float dtv = a.dt[item];
    const float da = exp_approx(dtv * a.A[h]);
    load_row(Bf, Bm + b * a.B_sb + g * a.B_sg, N);
    load_row(Cf, Cm + b * a.C_sb + g * a.C_sg, N);
    const T* xr = x + b * a.x_sb + h * a.x_sh;
    ST* sh = state + b * a.s_sb + h * a.s_sh;
    for (int64_t p = 0; p < P; ++p) {
      ST* sp = sh + p * N;
      load_row(s, sp, N);
      const float xv = load(xr, p);
      float ov = state_row_step(s, Bf, Cf, da, xv * dtv, N);
      for (int64_t n = 0; n < N; ++n) store(sp, n, s[n]);
      if (a.D) ov += a.D[h * P + p] * xv;
      orow[p] = ov;
    }
    if (z) {
      const T* zr = z + b * a.z_sb + h * a.z_sh;
      for (int64_t p = 0; p < P; ++p) orow[p] *= silu(load(zr, p));
    }
    store_row(out + item * P, orow, P);
  }
}

void step(const StepArgs& a, int64_t begin, int64_t end) {
  if (a.dtype == DType::BFloat16) {
    if (a.state_fp32) {
      step_t<bf16_bits, float>(a, begin, end);
    } else {
      step_t<bf16_bits, bf16_bits>(a, begin, end);
    }
  } else {
    step_t<float, float>(a, begin, end);
  }
}

// ---- Mamba-1 -------------------------------------------------------------

template <typename T>
void selective_scan_t(const SelectiveScanArgs& a, int64_t begin, int64_t end) {
  const T* u = static_cast<const T*>(a.u);
  const T* Bm = static_cast<const T*>(a.B);
  const T* Cm = static_cast<const T*>(a.C);
  const T* z = static_cast<const T*>(a.z);
  T* out = static_cast<T*>(a.out);
  const int64_t Dm = a.dim, N = a.dstate, L = a.len;
  const int64_t per_group = Dm / a.groups;
  float* s = scratch(0, N);
  float* Bf = scratch(1, N);
  float* Cf = scratch(2, N);
  float* yrow = scratch(3, L);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / Dm, d = item % Dm, g = d / per_group;
    std::memset(s, 0, static_cast<size_t>(N) * sizeof(float));
    const float* Ad = a.A + d * N;
    const float* delta = a.delta + item * L;
    const T* ur = u + b * a.u_sb + d * a.u_sd;
    const T* Bg = Bm + b * a.B_sb + g * a.B_sg;
    const T* Cg = Cm + b * a.C_sb + g * a.C_sg;
    const float Dd = a.D ? a.D[d] : 0.0f;
    for (int64_t t = 0; t < L; ++t) {
      const float dl = delta[t];
      const float uv = load(ur, t);
      const float du = dl * uv;
      for (int64_t n = 0; n < N; ++n) {
        Bf[n] = load(Bg, n * a.B_sn + t);
        Cf[n] = load(Cg, n * a.C_sn + t);
      }
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t n = 0; n < N; ++n) {
        const float v = exp_approx(dl * Ad[n]) * s[n] + du * Bf[n];
        s[n] = v;
        acc += v * Cf[n];
      }
      yrow[t] = acc + Dd * uv;
    }
    if (z) {
      const T* zr = z + b * a.z_sb + d * a.z_sd;
      for (int64_t t = 0; t < L; ++t) yrow[t] *= silu(load(zr, t));
    }
    store_row(out + item * L, yrow, L);
    if (a.last_state) {
      std::memcpy(a.last_state + item * N, s, static_cast<size_t>(N) * sizeof(float));
    }
  }
}

void selective_scan(const SelectiveScanArgs& a, int64_t begin, int64_t end) {
  if (a.dtype == DType::BFloat16) {
    selective_scan_t<bf16_bits>(a, begin, end);
  } else {
    selective_scan_t<float>(a, begin, end);
  }
}

const CpuTable kTable{MAMBA_CPU_CAPABILITY, conv, conv_update, scan, step, selective_scan};

}  // namespace

const CpuTable* MAMBA_CPU_TABLE() { return &kTable; }

}  // namespace mamba_ssm
