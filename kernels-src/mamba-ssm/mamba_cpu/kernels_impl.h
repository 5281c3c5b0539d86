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
#include <type_traits>
#include <vector>

#if defined(MAMBA_HW_BF16) || defined(__AVX2__)
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

#include "conv_vec.h"

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
  if constexpr (std::is_same_v<T, float>) {  // the backend gives bf16 no row block
    if (conv_rows_fixed_applies(a)) {
      a.silu ? conv_rows_width<T, true>(a, begin, end) : conv_rows_width<T, false>(a, begin, end);
      return;
    }
  }
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
      for (int64_t k = 0; k < K; ++k) acc += a.w[d * K + k] * seq[S + l - (K - 1) + k];
      store(oc, l * a.o_sl, a.silu ? silu(acc) : acc);
    }
    for (int64_t i = 0; i < S; ++i) store(sc, i * a.s_sl, seq[L + i]);
  }
}

// The decode step as the models take it (one token, a [B, D, S] state with S
// contiguous, width and state length known at compile time): one item is a
// block of channels of one batch row, and each loop below runs across channels,
// so GCC vectorizes it (a channel's S state positions and K taps are interleaved
// groups it loads and stores with shuffles). `acc` holds the conv, then the output.
template <typename T, int K, int S>
void conv_update_step(const ConvUpdateArgs& a, int64_t b, int64_t d0, int64_t d1, float* acc) {
  const T* x = static_cast<const T*>(a.x) + b * a.x_sb;
  T* st = static_cast<T*>(a.state) + b * a.s_sb;
  T* out = static_cast<T*>(a.out) + b * a.o_sb;
  const int64_t n = d1 - d0;
  const float* w = a.w + d0 * K;
  for (int64_t i = 0; i < n; ++i) acc[i] = a.bias ? a.bias[d0 + i] : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = d0 + i;
    float s[S];
    for (int k = 0; k < S; ++k) s[k] = load(st, d * S + k);
    const float xv = load(x, d * a.x_sd);
    float v = acc[i];
    for (int k = 0; k < K - 1; ++k) v += w[i * K + k] * s[S - (K - 1) + k];
    acc[i] = v + w[i * K + K - 1] * xv;
    for (int k = 0; k + 1 < S; ++k) store(st, d * S + k, s[k + 1]);
    store(st, d * S + S - 1, xv);
  }
  if (a.silu) {
    for (int64_t i = 0; i < n; ++i) acc[i] = silu(acc[i]);
  }
  if (a.o_sd == 1) {
    store_row(out + d0, acc, n);
  } else {
    for (int64_t i = 0; i < n; ++i) store(out, (d0 + i) * a.o_sd, acc[i]);
  }
}

template <typename T>
void conv_update_blocks(const ConvUpdateArgs& a, int64_t begin, int64_t end) {
  const int64_t cb = a.channel_block, blocks = (a.dim + cb - 1) / cb;
  float* acc = scratch(0, cb);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / blocks, d0 = item % blocks * cb;
    const int64_t d1 = d0 + cb < a.dim ? d0 + cb : a.dim;
    if (a.state_len == 4) {
      a.silu ? conv_update_w4s4<T, true>(a, b, d0, d1) : conv_update_w4s4<T, false>(a, b, d0, d1);
    } else {
      conv_update_step<T, 4, 3>(a, b, d0, d1, acc);
    }
  }
}

void conv_update(const ConvUpdateArgs& a, int64_t begin, int64_t end) {
  const bool fixed = a.channel_block > 0;
  if (a.dtype == DType::BFloat16) {
    fixed ? conv_update_blocks<bf16_bits>(a, begin, end) : conv_update_t<bf16_bits>(a, begin, end);
  } else {
    fixed ? conv_update_blocks<float>(a, begin, end) : conv_update_t<float>(a, begin, end);
  }
}

// ---- Mamba-2 -------------------------------------------------------------

// One token for one head: S = da S + xd B^T, y = S C (+ D x, * silu(z)).
// Fused so each state row is read and written once per token (the decode step).
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

// The SSD chunked form's matmuls, in register tiles. GCC vector types of the
// target's width (ymm for AVX2, zmm for AVX-512) and of 8 floats (for heads of
// 8 channels, Falcon-H1's), so each copy of these loops uses its own
// instruction set without intrinsics. Loads and stores go through memcpy: rows
// start at any float address, and a template argument loses a typedef's
// alignment attribute.
#ifdef MAMBA_ISA_AVX512
constexpr int kVec = 16;
#else
constexpr int kVec = 8;
#endif
typedef float vwide __attribute__((vector_size(kVec * sizeof(float))));

template <typename V>
inline V loadv(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
inline void storev(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// Rows [0, MR) x columns [0, NV * lanes of V) of out (+)= A B over k < K.
template <int MR, typename V, int NV>
inline void gemm_tile(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float* out, int64_t ldo, bool accumulate) {
  constexpr int lanes = sizeof(V) / sizeof(float);
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NV; ++c) {
      acc[r][c] = accumulate ? loadv<V>(out + r * ldo + c * lanes) : V{};
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    V b[NV];
    for (int c = 0; c < NV; ++c) b[c] = loadv<V>(B + k * ldb + c * lanes);
    for (int r = 0; r < MR; ++r) {
      const float a = A[r * lda + k];
      for (int c = 0; c < NV; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NV; ++c) storev(out + r * ldo + c * lanes, acc[r][c]);
  }
}

constexpr int kTileRows = kVec == 16 ? 8 : 4;

// One row block (mr <= kTileRows rows) of `gemm` over columns [n0, n1).
template <typename V, int NV>
inline void gemm_cols(int64_t mr, int64_t K, const float* A, int64_t lda, const float* B,
                      int64_t ldb, float* out, int64_t ldo, bool accumulate) {
  if (mr == kTileRows) {
    gemm_tile<kTileRows, V, NV>(K, A, lda, B, ldb, out, ldo, accumulate);
    return;
  }
  for (int64_t r = 0; r < mr; ++r) {
    gemm_tile<1, V, NV>(K, A + r * lda, lda, B, ldb, out + r * ldo, ldo, accumulate);
  }
}

// out[M, Nc] (+)= A[M, K] B[K, Nc], all row-major floats. `lower_k`: A is lower
// triangular (a row block needs k up to its last row only); `lower_cols`: only
// the columns up to each row block's last row are wanted (the rest is left as
// is, or computed where a whole tile is cheaper).
inline void gemm(int64_t M, int64_t Nc, int64_t K, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float* out, int64_t ldo, bool accumulate, bool lower_k,
                 bool lower_cols) {
  constexpr int64_t wide = 2 * kVec;
  for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
    const int64_t mr = M - m0 < kTileRows ? M - m0 : kTileRows;
    const int64_t kend = lower_k && m0 + mr < K ? m0 + mr : K;
    const int64_t tiled = (m0 + mr + wide - 1) / wide * wide;
    const int64_t nend = lower_cols && tiled < Nc ? tiled : Nc;
    const float* Am = A + m0 * lda;
    float* om = out + m0 * ldo;
    int64_t n0 = 0;
    for (; n0 + wide <= nend; n0 += wide) {
      gemm_cols<vwide, 2>(mr, kend, Am, lda, B + n0, ldb, om + n0, ldo, accumulate);
    }
    for (; n0 + 8 <= nend; n0 += 8) {
      gemm_cols<v8, 1>(mr, kend, Am, lda, B + n0, ldb, om + n0, ldo, accumulate);
    }
    for (int64_t r = 0; r < mr; ++r) {  // columns left over (short chunks, odd head sizes)
      for (int64_t n = n0; n < nend; ++n) {
        float acc = accumulate ? om[r * ldo + n] : 0.0f;
        for (int64_t k = 0; k < kend; ++k) acc += Am[r * lda + k] * B[k * ldb + n];
        om[r * ldo + n] = acc;
      }
    }
  }
}

// The chunk size of the CPU loops. The chunked form gives the scan's result for
// any chunk size (up to rounding); the work per token is ~Q P / 2 for the
// quadratic part plus 2 P N for the state, so the CPU takes chunks no longer
// than this whatever the caller's chunk_size, which only tiles GPU work.
constexpr int64_t kCpuChunk = 64;

// Mamba-2 by the SSD chunked algorithm (Dao & Gu 2024). One item is a block of
// heads of one group of one batch row, walked chunk by chunk: per chunk, the
// group's C B^T is computed once for its heads; per head, within the chunk
//   Y = (C B^T o L) (dt x) + diag(exp(cum)) C S^T          L[i,j] = exp(cum_i - cum_j), j <= i
// and the state passes to the next chunk as
//   S^T = exp(cum_last) S^T + (B o exp(cum_last - cum))^T (dt x)
// (cum: the running sum of dt A within the chunk). The state is kept transposed
// ([N, P]) so every product above is one row-major matmul.
template <typename T>
void scan_t(const ScanArgs& a, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(a.x);
  const T* Bm = static_cast<const T*>(a.B);
  const T* Cm = static_cast<const T*>(a.C);
  const T* z = static_cast<const T*>(a.z);
  T* y = static_cast<T*>(a.y);
  const int64_t H = a.heads, P = a.headdim, N = a.dstate, L = a.len, G = a.groups;
  const int64_t per_group = H / G, hb = a.head_block;
  const int64_t blocks = (per_group + hb - 1) / hb;
  const int64_t Q = a.chunk < kCpuChunk ? a.chunk : kCpuChunk;
  // One scratch buffer, carved: the chunk's C and B^T, C B^T and the masked
  // scores, dt x and the output rows, the heads' states.
  float* buf = scratch(0, 2 * Q * N + 2 * Q * Q + 2 * Q * P + hb * N * P + 2 * Q);
  float* Cf = buf;
  float* Bt = Cf + Q * N;
  float* CB = Bt + N * Q;
  float* M = CB + Q * Q;
  float* Xd = M + Q * Q;
  float* Y = Xd + Q * P;
  float* St = Y + Q * P;
  float* cum = St + hb * N * P;
  float* dts = cum + Q;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / (G * blocks), g = item / blocks % G, blk = item % blocks;
    const int64_t h0 = g * per_group + blk * hb;
    const int64_t nh = per_group - blk * hb < hb ? per_group - blk * hb : hb;
    for (int64_t i = 0; i < nh; ++i) {  // initial states, transposed to [N, P]
      float* s = St + i * N * P;
      if (a.init) {
        const float* src = a.init + (b * H + h0 + i) * P * N;
        for (int64_t p = 0; p < P; ++p) {
          for (int64_t n = 0; n < N; ++n) s[n * P + p] = src[p * N + n];
        }
      } else {
        std::memset(s, 0, static_cast<size_t>(N * P) * sizeof(float));
      }
    }
    bool state_zero = a.init == nullptr;
    for (int64_t t0 = 0; t0 < L; t0 += Q) {
      const int64_t q = L - t0 < Q ? L - t0 : Q;
      for (int64_t i = 0; i < q; ++i) {
        load_row(Cf + i * N, Cm + b * a.C_sb + (t0 + i) * a.C_sl + g * a.C_sg, N);
        const T* Br = Bm + b * a.B_sb + (t0 + i) * a.B_sl + g * a.B_sg;
        for (int64_t n = 0; n < N; ++n) Bt[n * q + i] = load(Br, n);
      }
      gemm(q, q, N, Cf, N, Bt, q, CB, q, false, false, true);
      for (int64_t hi = 0; hi < nh; ++hi) {
        const int64_t h = h0 + hi;
        float* S = St + hi * N * P;
        const float Ah = a.A[h];
        float run = 0.0f;
        for (int64_t i = 0; i < q; ++i) {
          dts[i] = a.dt[(b * L + t0 + i) * H + h];
          run += dts[i] * Ah;
          cum[i] = run;
        }
        for (int64_t i = 0; i < q; ++i) {
          const T* xr = x + b * a.x_sb + (t0 + i) * a.x_sl + h * a.x_sh;
          float* xd = Xd + i * P;
          const float d = dts[i];
          for (int64_t p = 0; p < P; ++p) xd[p] = load(xr, p) * d;
          float* mr = M + i * q;
          const float* cbr = CB + i * q;
          const float ci = cum[i];
          for (int64_t j = 0; j <= i; ++j) mr[j] = cbr[j] * exp_approx(ci - cum[j]);
          for (int64_t j = i + 1; j < q; ++j) mr[j] = 0.0f;
        }
        // The diagonal scalings fall on the [q, P] sides (x and y rows), not on the
        // [q, N] sides of B and C: less work wherever P < N (Falcon-H1: 8 vs 256).
        if (!state_zero) {
          gemm(q, P, N, Cf, N, S, P, Y, P, false, false, false);
          for (int64_t i = 0; i < q; ++i) {
            const float e = exp_approx(cum[i]);
            for (int64_t p = 0; p < P; ++p) Y[i * P + p] *= e;
          }
        }
        gemm(q, P, q, M, q, Xd, P, Y, P, !state_zero, true, false);
        const float last = cum[q - 1];
        for (int64_t j = 0; j < q; ++j) {
          const float w = exp_approx(last - cum[j]);
          for (int64_t p = 0; p < P; ++p) Xd[j * P + p] *= w;
        }
        if (!state_zero) {
          const float decay = exp_approx(last);
          for (int64_t e = 0; e < N * P; ++e) S[e] *= decay;
        }
        gemm(N, P, q, Bt, q, Xd, P, S, P, !state_zero, false, false);
        const float* Dh = a.D ? a.D + h * P : nullptr;
        for (int64_t i = 0; i < q; ++i) {
          float* yr = Y + i * P;
          if (Dh) {
            const T* xr = x + b * a.x_sb + (t0 + i) * a.x_sl + h * a.x_sh;
            for (int64_t p = 0; p < P; ++p) yr[p] += Dh[p] * load(xr, p);
          }
          if (z) {
            const T* zr = z + b * a.z_sb + (t0 + i) * a.z_sl + h * a.z_sh;
            for (int64_t p = 0; p < P; ++p) yr[p] *= silu(load(zr, p));
          }
          store_row(y + ((b * L + t0 + i) * H + h) * P, yr, P);
        }
      }
      state_zero = false;
    }
    if (a.final_state) {
      for (int64_t i = 0; i < nh; ++i) {
        const float* s = St + i * N * P;
        float* dst = a.final_state + (b * H + h0 + i) * P * N;
        for (int64_t p = 0; p < P; ++p) {
          for (int64_t n = 0; n < N; ++n) dst[p * N + n] = s[n * P + p];
        }
      }
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
