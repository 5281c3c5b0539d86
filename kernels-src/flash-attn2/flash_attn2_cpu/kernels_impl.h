// Blocked attention with an online softmax, written once against at::vec and
// compiled once per CPU capability: the including file (kernels_<cap>.cpp)
// selects the instruction set and defines FLASH_ATTN2_KERNEL_TABLE. Everything
// else stays in an anonymous namespace, so the copies never share a symbol.
//
// Per task (batch, KV head, block of query positions: the rows of all the query
// heads that share the KV head, see kTaskRows), for each block of at most
// kKeyBlock visible keys:
//   S = Q_rows @ K_blk^T                 (register-tiled loop, K pre-transposed)
//   m' = max(m, rowmax(scale * S))       (softcap / mask applied first where set)
//   P = exp(scale * S - m'); l = l * exp(m - m') + rowsum P   (one fused pass)
//   O = O * exp(m - m') + P @ V_blk      (same register-tiled loop)
// and finally out = O / l. Nothing of size Sq x Sk is ever materialised, and
// key blocks entirely outside a causal / sliding window are skipped. The two
// products are float32 (FloatProducts) or, where the including file defines
// FLASH_ATTN2_BF16_DOT, bf16 pairs multiplied by VDPBF16PS (Bf16Products);
// FLASH_ATTN2_BRGEMM_TABLE adds a table whose bf16 products are oneDNN's
// brgemm through ATen (BrgemmProducts).
#pragma once

#include "kernels.h"

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#ifdef FLASH_ATTN2_BF16_DOT
#include <immintrin.h>
#endif
#ifdef FLASH_ATTN2_BRGEMM_TABLE
#include <ATen/native/CPUBlas.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#ifndef FLASH_ATTN2_KERNEL_TABLE
#error "define FLASH_ATTN2_KERNEL_TABLE before including kernels_impl.h"
#endif

namespace flash_attn2_cpu {
namespace {

using at::vec::Vectorized;
using V = Vectorized<float>;

constexpr int64_t kVec = V::size();
// Register tile of the matrix loops: kRows rows x kCols vectors of C stay in
// registers while the shared dimension streams by (4 x 4 zmm = 16 of the 32
// AVX-512 registers; 4 x 2 of AVX2's 16).
constexpr int kRows = 4;
constexpr int kCols = kVec >= 16 ? 4 : 2;
constexpr int64_t kColStep = kCols * kVec;
static_assert(kKeyPadding % kColStep == 0, "key padding must cover the widest column step");

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// C[R x (NV*kVec)] (+)= A[R x K] @ B[K x (NV*kVec)]; A is read by scalar
// broadcast, B by full vectors. `count` < NV*kVec limits the last vector
// (loads and stores only `count` - (NV-1)*kVec lanes of it).
template <int R, int NV>
inline void tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, int64_t k_len, bool accumulate, int64_t count) {
  const bool partial = count < NV * kVec;
  const int64_t last = count - (NV - 1) * kVec;
  V acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if (!accumulate) {
        acc[r][j] = V(0.0f);
      } else if (partial && j == NV - 1) {
        acc[r][j] = V::loadu(c + r * ldc + j * kVec, last);
      } else {
        acc[r][j] = V::loadu(c + r * ldc + j * kVec);
      }
    }
  }
  for (int64_t k = 0; k < k_len; ++k) {
    V bv[NV];
    const float* b_row = b + k * ldb;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      bv[j] = (partial && j == NV - 1) ? V::loadu(b_row + j * kVec, last)
                                       : V::loadu(b_row + j * kVec);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const V av(a[r * lda + k]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        acc[r][j] = at::vec::fmadd(av, bv[j], acc[r][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if (partial && j == NV - 1) {
        acc[r][j].store(c + r * ldc + j * kVec, last);
      } else {
        acc[r][j].store(c + r * ldc + j * kVec);
      }
    }
  }
}

// fn(std::integral_constant<int, R>) with R = rows for 1..3 rows, else kRows:
// the register tile's row count as a compile-time constant.
template <class Fn>
inline void with_rows(int64_t rows, Fn&& fn) {
  switch (rows) {
    case 1:
      return fn(std::integral_constant<int, 1>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    default:
      return fn(std::integral_constant<int, kRows>{});
  }
}

template <int NV>
inline void tile_rows(int64_t rows, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float* c, int64_t ldc, int64_t k_len, bool accumulate, int64_t count) {
  with_rows(rows, [&](auto r) {
    tile<decltype(r)::value, NV>(a, lda, b, ldb, c, ldc, k_len, accumulate, count);
  });
}

// C[M x N] (+)= A[M x K] @ B[K x N], all row-major float with leading
// dimensions. Column blocks outside, rows inside: one kColStep-wide slice of
// B (K x 64 floats) stays in L1 while every row of A streams past it.
void matmul(int64_t m, int64_t n, int64_t k_len, const float* a, int64_t lda, const float* b,
            int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  int64_t col = 0;
  for (; col + kColStep <= n; col += kColStep) {
    for (int64_t row = 0; row < m; row += kRows) {
      tile_rows<kCols>(std::min<int64_t>(kRows, m - row), a + row * lda, lda, b + col, ldb,
                       c + row * ldc + col, ldc, k_len, accumulate, kColStep);
    }
  }
  for (; col < n; col += kVec) {  // head dims that are not a multiple of kColStep
    const int64_t count = std::min<int64_t>(kVec, n - col);
    for (int64_t row = 0; row < m; row += kRows) {
      tile_rows<1>(std::min<int64_t>(kRows, m - row), a + row * lda, lda, b + col, ldb,
                   c + row * ldc + col, ldc, k_len, accumulate, count);
    }
  }
}

inline float reduce_max(const V& v) {
  return at::vec::vec_reduce_all<float>(
      [](V& x, V& y) { return at::vec::maximum(x, y); }, v);
}

inline float reduce_sum(const V& v) {
  return at::vec::vec_reduce_all<float>([](V& x, V& y) { return x + y; }, v);
}

// Scores of one row over keys [lo, hi) of the block, in place: softcap, scale
// and mask applied. Returns the row maximum (-inf when every score is -inf).
inline float prepare_scores(float* s, int64_t lo, int64_t hi, const float* mask, float scale,
                            float softcap) {
  const bool capped = softcap > 0.0f;
  const float pre = capped ? scale / softcap : scale;  // softcap * tanh(scale * x / softcap)
  const V vpre(pre);
  const V vcap(softcap);
  V vmax(kNegInf);
  int64_t j = lo;
  for (; j + kVec <= hi; j += kVec) {
    V x = V::loadu(s + j) * vpre;
    if (capped) {
      x = vcap * x.tanh();
    }
    if (mask != nullptr) {
      x = x + V::loadu(mask + j);
    }
    x.store(s + j);
    vmax = at::vec::maximum(vmax, x);
  }
  float row_max = reduce_max(vmax);
  for (; j < hi; ++j) {
    float x = s[j] * pre;
    if (capped) {
      x = softcap * std::tanh(x);
    }
    if (mask != nullptr) {
      x += mask[j];
    }
    s[j] = x;
    row_max = std::max(row_max, x);
  }
  return row_max;
}

// p = exp(s - row_max) over [lo, hi) in place; returns the sum of p.
inline float exponentiate(float* s, int64_t lo, int64_t hi, float row_max) {
  const V vmax(row_max);
  V vsum(0.0f);
  int64_t j = lo;
  for (; j + kVec <= hi; j += kVec) {
    const V p = (V::loadu(s + j) - vmax).exp_u20();
    p.store(s + j);
    vsum = vsum + p;
  }
  float sum = reduce_sum(vsum);
  for (; j < hi; ++j) {
    s[j] = std::exp(s[j] - row_max);
    sum += s[j];
  }
  return sum;
}

inline void scale_row(float* row, int64_t n, float factor) {
  at::vec::map([factor](V x) { return x * V(factor); }, row, row, n);
}

// Writes one finished row (O / l) in the output dtype.
inline void store_row(const AttentionArgs& args, void* dst, const float* acc, float l,
                      float* staging) {
  const int64_t n = args.head_dim_v;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // no visible key: zeros, as FlashAttention
  float* target = args.out_dtype == c10::ScalarType::Float ? static_cast<float*>(dst) : staging;
  at::vec::map([inv](V x) { return x * V(inv); }, target, acc, n);
  if (args.out_dtype == c10::ScalarType::BFloat16) {
    at::vec::convert(staging, static_cast<c10::BFloat16*>(dst), n);
  } else if (args.out_dtype == c10::ScalarType::Half) {
    at::vec::convert(staging, static_cast<c10::Half*>(dst), n);
  }
}

// The visible keys of query row i: [lo, hi). Causal attention is the window
// (-1, 0); the diagonal is bottom-right aligned (offset Sk - Sq) as in
// FlashAttention 2, so a decode step (Sq = 1) sees the whole cache.
struct Window {
  int64_t offset, left, right, seq_k;
  int64_t lo(int64_t i) const {
    return left < 0 ? 0 : std::clamp<int64_t>(i + offset - left, 0, seq_k);
  }
  int64_t hi(int64_t i) const {
    return right < 0 ? seq_k : std::clamp<int64_t>(i + offset + right + 1, 0, seq_k);
  }
};

// ---- the blocked path: one task per (batch, KV head, block of query positions) --
//
// A task's rows are the query rows of all G = Hq / Hkv query heads that share
// one KV head, for the same block of positions (row r: head g = r / positions,
// position q0 + r % positions), gathered into a packed buffer. Every block of
// K and V is then loaded once for all G heads (grouped-query attention reuses
// it from L1/L2 instead of reloading it per head), and both products get G times
// more rows: the M of the register tiles, or of oneDNN's brgemm (AMX tiles are
// 16 rows; 128 rows reuse each loaded tile of K or V eight times).

// Rows per task, the M of both products. 128 rows x 256 keys of float scores
// (128 KB), their bf16 probabilities (64 KB), the 128 x Dv float accumulator
// (64 KB at Dv = 128) and one block of K and V (64 KB each, bf16, D = 128) fit a
// core's L2 together (1 MB on Zen 4, 2 MB on Sapphire Rapids); more rows would
// push the score tile out, fewer would reload K/V tiles more often per flop.
constexpr int64_t kTaskRows = 128;

// The query positions of one task: kTaskRows / G, fewer when that leaves a
// thread without two tasks to balance causal work, but not below 16 (one AMX
// tile of rows per head; below that the per-task overhead shows).
inline int64_t task_positions(const AttentionArgs& args) {
  const int64_t group = args.heads_q / args.heads_kv;
  int64_t positions = std::max<int64_t>(1, kTaskRows / group);
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  while (positions > 16 &&
         args.batch * args.heads_kv * ((args.seq_q + positions - 1) / positions) < 2 * threads) {
    positions /= 2;
  }
  return std::min(positions, std::max<int64_t>(1, args.seq_q));
}

struct Scratch {
  std::vector<float> scores, acc, row_max, row_sum, staging, q32;
  std::vector<c10::BFloat16> probs, q16;  // bf16 products: P and the packed Q rows
  std::vector<int64_t> lo, hi;            // visible keys per position of the task
  Scratch(const AttentionArgs& args, int64_t rows, int64_t positions)
      : scores(rows * kKeyBlock),
        acc(rows * args.head_dim_v),
        row_max(rows),
        row_sum(rows),
        staging(args.head_dim_v),
        lo(positions),
        hi(positions) {}
};

// Row r of the task's packed Q: q[b, h, i, :] converted to T (float or bf16).
template <typename T>
inline void pack_q_row(const AttentionArgs& args, int64_t b, int64_t h, int64_t i, T* dst) {
  const int64_t offset = b * args.q_sb + h * args.q_sh + i * args.q_ss;
  const int64_t n = args.head_dim;
  switch (args.q_dtype) {
    case c10::ScalarType::BFloat16:
      at::vec::convert(static_cast<const c10::BFloat16*>(args.q_raw) + offset, dst, n);
      return;
    case c10::ScalarType::Half:
      at::vec::convert(static_cast<const c10::Half*>(args.q_raw) + offset, dst, n);
      return;
    default:
      at::vec::convert(static_cast<const float*>(args.q_raw) + offset, dst, n);
  }
}

// The two products of a block in float32: S = Q K^T from k transposed, and
// O += P V. Any CPU (at::vec's vectors of this capability).
struct FloatProducts {
  using QType = float;
  using Prob = float;                             // P is written over the scores
  static constexpr int64_t kKeyAlign = kColStep;  // first key of a task's first block

  const float* kt;
  int64_t ldk;
  const float* v;
  int64_t ldv;

  FloatProducts(const AttentionArgs& args, int64_t b, int64_t hk)
      : kt(args.kt + (b * args.heads_kv + hk) * args.head_dim * args.sk_padded),
        ldk(args.sk_padded),
        v(args.v + b * args.v_sb + hk * args.v_sh),
        ldv(args.v_ss) {}

  static std::vector<float>& q_buffer(Scratch& scratch) { return scratch.q32; }
  static float* prob_rows(Scratch& scratch) { return scratch.scores.data(); }

  // scores[rows x width] = Q K^T for keys [k0, k0 + width), Q packed [rows x d].
  void scores(int64_t rows, int64_t k0, int64_t width, int64_t d, const float* q,
              float* s) const {
    matmul(rows, width, d, q, d, kt + k0, ldk, s, kKeyBlock, false);
  }
  // acc[rows x dv] += P V over keys [k0, k1); P rows hold zeros up to `width`.
  void accumulate(int64_t rows, int64_t k0, int64_t k1, int64_t /*width*/, int64_t dv,
                  const float* p, float* acc) const {
    matmul(rows, dv, k1 - k0, p, kKeyBlock, v + k0 * ldv, ldv, acc, dv, true);
  }
};

#ifdef FLASH_ATTN2_BF16_DOT
// ---- bfloat16 products with VDPBF16PS -------------------------------------
//
// One instruction multiplies 16 pairs of bf16 by 16 pairs and adds each pair's
// two products into a float lane: twice the multiplies of a float FMA, read
// straight from bf16 (no widening of k and v). Products of two bf16 are exact
// in float, so S is what the float loops compute; P is rounded to bf16 for
// O += P V, as sdpa's bf16 path does.

inline uint32_t pair_at(const c10::BFloat16* p) {  // two bf16 as one word, any alignment
  uint32_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

// C[R x (NV*16)] (+)= sum over pairs p: A(r, p) . B(p, columns), where pair p
// of A's row r is a[r * lda + 2p .. +1] and row p of B holds one pair per
// column (b[p * ldb + 2 * col .. +1]). `count` < NV*16 limits the last vector.
template <int R, int NV>
inline void tile_dp(const c10::BFloat16* a, int64_t lda, const c10::BFloat16* b, int64_t ldb,
                    float* c, int64_t ldc, int64_t pairs, bool accumulate, int64_t count) {
  const bool partial = count < NV * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (count - (NV - 1) * 16)) - 1u);
  __m512 acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* dst = c + r * ldc + j * 16;
      acc[r][j] = !accumulate                      ? _mm512_setzero_ps()
                  : (partial && j == NV - 1) ? _mm512_maskz_loadu_ps(tail, dst)
                                             : _mm512_loadu_ps(dst);
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512i bv[NV];
    const c10::BFloat16* b_row = b + p * ldb;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      bv[j] = (partial && j == NV - 1) ? _mm512_maskz_loadu_epi32(tail, b_row + 32 * j)
                                       : _mm512_loadu_si512(b_row + 32 * j);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_set1_epi32(static_cast<int>(pair_at(a + r * lda + 2 * p)));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        acc[r][j] = _mm512_dpbf16_ps(acc[r][j], (__m512bh)av, (__m512bh)bv[j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* dst = c + r * ldc + j * 16;
      if (partial && j == NV - 1) {
        _mm512_mask_storeu_ps(dst, tail, acc[r][j]);
      } else {
        _mm512_storeu_ps(dst, acc[r][j]);
      }
    }
  }
}

template <int NV>
inline void tile_dp_rows(int64_t rows, const c10::BFloat16* a, int64_t lda,
                         const c10::BFloat16* b, int64_t ldb, float* c, int64_t ldc,
                         int64_t pairs, bool accumulate, int64_t count) {
  with_rows(rows, [&](auto r) {
    tile_dp<decltype(r)::value, NV>(a, lda, b, ldb, c, ldc, pairs, accumulate, count);
  });
}

// C[M x N] (+)= A B over `pairs` pairs of the shared dimension, blocked as matmul.
void matmul_dp(int64_t m, int64_t n, int64_t pairs, const c10::BFloat16* a, int64_t lda,
               const c10::BFloat16* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int64_t step = 4 * 16;
  int64_t col = 0;
  for (; col + step <= n; col += step) {
    for (int64_t row = 0; row < m; row += kRows) {
      tile_dp_rows<4>(std::min<int64_t>(kRows, m - row), a + row * lda, lda, b + 2 * col, ldb,
                      c + row * ldc + col, ldc, pairs, accumulate, step);
    }
  }
  for (; col < n; col += 16) {
    const int64_t count = std::min<int64_t>(16, n - col);
    for (int64_t row = 0; row < m; row += kRows) {
      tile_dp_rows<1>(std::min<int64_t>(kRows, m - row), a + row * lda, lda, b + 2 * col, ldb,
                      c + row * ldc + col, ldc, pairs, accumulate, count);
    }
  }
}

#endif  // FLASH_ATTN2_BF16_DOT

#ifdef FLASH_ATTN2_BF16_DOT
// The two products of a block with bf16 factors (VDPBF16PS): Q packed in bf16,
// k_pairs and v_pairs (AttentionArgs). Key blocks start on a packed block of
// k_pairs. P is rounded to bf16 for O += P V, as sdpa's bf16 path does.
struct Bf16Products {
  using QType = c10::BFloat16;
  using Prob = c10::BFloat16;
  static constexpr int64_t kKeyAlign = kKeyBlock;

  const c10::BFloat16* k;  // blocks of D/2 rows of kKeyBlock pairs
  int64_t block_size;      // elements per block: D * kKeyBlock
  const c10::BFloat16* v;  // sk_padded/2 rows of Dv pairs

  Bf16Products(const AttentionArgs& args, int64_t b, int64_t hk)
      : k(args.k_pairs + (b * args.heads_kv + hk) * args.head_dim * args.sk_padded),
        block_size(args.head_dim * kKeyBlock),
        v(args.v_pairs + (b * args.heads_kv + hk) * args.sk_padded * args.head_dim_v) {}

  static std::vector<c10::BFloat16>& q_buffer(Scratch& scratch) { return scratch.q16; }
  static c10::BFloat16* prob_rows(Scratch& scratch) { return scratch.probs.data(); }

  void scores(int64_t rows, int64_t k0, int64_t width, int64_t d, const c10::BFloat16* q,
              float* s) const {
    matmul_dp(rows, width, d / 2, q, d, k + k0 / kKeyBlock * block_size, 2 * kKeyBlock, s,
              kKeyBlock, false);
  }
  // k0 is even (blocks start on a packed block), so key pair (k0 + 2i, k0 + 2i + 1)
  // is row k0 / 2 + i of v; an odd block length meets the zero after it in P.
  void accumulate(int64_t rows, int64_t k0, int64_t k1, int64_t /*width*/, int64_t dv,
                  const c10::BFloat16* p, float* acc) const {
    const int64_t pairs = (k1 - k0 + 1) / 2;
    matmul_dp(rows, dv, pairs, p, kKeyBlock, v + k0 * dv, 2 * dv, acc, dv, true);
  }
};
#endif  // FLASH_ATTN2_BF16_DOT

#if defined(FLASH_ATTN2_BRGEMM_TABLE) && defined(FLASH_ATTN2_BF16_DOT)
// The same two products by ATen's batch-reduce GEMM (oneDNN brgemm ukernels,
// which run on AMX tiles where the CPU has them and on VDPBF16PS otherwise),
// reading the same packed layouts: the task's packed Q as A and a block of
// k_pairs as B for S (M = the task's rows, N = whole column steps of the block,
// K = D), P (bf16, zero past the block's keys up to the column step) as A and
// v_pairs as B for O (N = Dv, K = the block rounded up to a column step). N and
// K take only a handful of values and the leading dimensions are fixed, so
// oneDNN generates few kernels and caches them.
struct BrgemmProducts : Bf16Products {
  using Bf16Products::Bf16Products;

  void scores(int64_t rows, int64_t k0, int64_t width, int64_t d, const c10::BFloat16* q,
              float* s) const {
    at::native::cpublas::brgemm(rows, width, d, d, kKeyBlock, kKeyBlock, false, q,
                                k + k0 / kKeyBlock * block_size, s, true);
  }
  void accumulate(int64_t rows, int64_t k0, int64_t /*k1*/, int64_t width, int64_t dv,
                  const c10::BFloat16* p, float* acc) const {
    at::native::cpublas::brgemm(rows, dv, width, kKeyBlock, dv, dv, true, p, v + k0 * dv, acc,
                                true);
  }

  // AMX keeps a tile configuration per thread: hand it back when a thread is done.
  static void release() { at::native::cpublas::brgemm_release(true); }
};
#endif  // FLASH_ATTN2_BRGEMM_TABLE

// The row maximum of scale * s over [lo, hi) without writing s: the fused
// softmax folds the scale into its exponent (scale > 0, so the maximum of
// scale * s is scale * max s).
inline float scaled_max(const float* s, int64_t lo, int64_t hi, float scale) {
  V vmax(kNegInf);
  int64_t j = lo;
  for (; j + kVec <= hi; j += kVec) {
    vmax = at::vec::maximum(vmax, V::loadu(s + j));
  }
  float row_max = reduce_max(vmax);
  for (; j < hi; ++j) {
    row_max = std::max(row_max, s[j]);
  }
  return row_max * scale;
}

// p[j] = exp(a * s[j] - m) for j in [lo, hi) in Prob (float: in place over s),
// zeros over [0, lo) and [hi, width); returns the sum of the float values. One
// pass: the exponent, the row sum and the rounding to bf16 happen together.
template <typename Prob>
inline float exp_row(const float* s, int64_t lo, int64_t hi, int64_t width, float a, float m,
                     Prob* p) {
  std::fill(p, p + lo, Prob(0.0f));
  std::fill(p + hi, p + width, Prob(0.0f));
  const V va(a);
  const V vm(m);
  V vsum(0.0f);
  int64_t j = lo;
  if constexpr (std::is_same_v<Prob, float>) {
    for (; j + kVec <= hi; j += kVec) {
      const V e = at::vec::fmsub(V::loadu(s + j), va, vm).exp_u20();
      e.store(p + j);
      vsum = vsum + e;
    }
  } else {
    for (; j + 2 * kVec <= hi; j += 2 * kVec) {
      const V e0 = at::vec::fmsub(V::loadu(s + j), va, vm).exp_u20();
      const V e1 = at::vec::fmsub(V::loadu(s + j + kVec), va, vm).exp_u20();
      at::vec::convert_from_float<Prob>(e0, e1).store(p + j);
      vsum = vsum + e0 + e1;
    }
  }
  float sum = reduce_sum(vsum);
  for (; j < hi; ++j) {
    const float e = std::exp(a * s[j] - m);
    p[j] = Prob(e);
    sum += e;
  }
  return sum;
}

template <class Products>
void attention_task(const AttentionArgs& args, const Window& window, int64_t b, int64_t hk,
                    int64_t q0, int64_t positions, Scratch& scratch) {
  using QType = typename Products::QType;
  using Prob = typename Products::Prob;
  const int64_t group = args.heads_q / args.heads_kv;
  const int64_t count = std::min(positions, args.seq_q - q0);  // positions of this task
  const int64_t rows = group * count;
  const int64_t d = args.head_dim;
  const int64_t dv = args.head_dim_v;
  const Products products(args, b, hk);
  auto head_of = [&](int64_t r) { return hk * group + r / count; };
  auto position_of = [&](int64_t r) { return q0 + r % count; };

  std::vector<QType>& q = Products::q_buffer(scratch);
  q.resize(rows * d);
  for (int64_t r = 0; r < rows; ++r) {
    pack_q_row(args, b, head_of(r), position_of(r), q.data() + r * d);
  }
  float* scores = scratch.scores.data();
  Prob* probs = Products::prob_rows(scratch);
  float* acc = scratch.acc.data();
  float* row_max = scratch.row_max.data();
  float* row_sum = scratch.row_sum.data();
  std::fill_n(acc, rows * dv, 0.0f);
  std::fill_n(row_max, rows, kNegInf);
  std::fill_n(row_sum, rows, 0.0f);
  for (int64_t i = 0; i < count; ++i) {
    scratch.lo[i] = window.lo(q0 + i);
    scratch.hi[i] = window.hi(q0 + i);
  }
  // Without mask or softcap the scores need no pass of their own: the scale
  // goes into the exponent.
  const bool transform = args.mask != nullptr || args.softcap > 0.0f;

  // lo and hi are non-decreasing in the position, so the task's keys are
  // [lo(first), hi(last)). Starting on a column step (or a packed block) keeps
  // every score tile inside the packed keys.
  const int64_t keys_begin = scratch.lo[0] / Products::kKeyAlign * Products::kKeyAlign;
  const int64_t keys_end = scratch.hi[count - 1];
  for (int64_t k0 = keys_begin; k0 < keys_end; k0 += kKeyBlock) {
    const int64_t k1 = std::min(k0 + kKeyBlock, keys_end);
    // Whole column steps: kt and the packed keys are zero past Sk.
    const int64_t width = (k1 - k0 + kColStep - 1) / kColStep * kColStep;
    products.scores(rows, k0, width, d, q.data(), scores);
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * kKeyBlock;
      Prob* p = probs + r * kKeyBlock;
      const int64_t i = r % count;
      const int64_t lo = std::clamp(scratch.lo[i], k0, k1) - k0;
      const int64_t hi = std::clamp(scratch.hi[i], k0, k1) - k0;
      if (lo >= hi) {
        std::fill(p, p + width, Prob(0.0f));
        continue;
      }
      float block_max;
      float exponent_scale = args.scale;
      if (transform) {
        const float* mask_row =
            args.mask == nullptr ? nullptr
                                 : args.mask + b * args.m_sb + head_of(r) * args.m_sh +
                                       position_of(r) * args.m_ss + k0;
        block_max = prepare_scores(s, lo, hi, mask_row, args.scale, args.softcap);
        exponent_scale = 1.0f;
      } else {
        block_max = scaled_max(s, lo, hi, args.scale);
      }
      const float new_max = std::max(row_max[r], block_max);
      if (new_max == kNegInf) {  // every score so far is -inf: nothing to add
        std::fill(p, p + width, Prob(0.0f));
        continue;
      }
      const float correction = std::exp(row_max[r] - new_max);  // 0 on the first block
      const float block_sum = exp_row(s, lo, hi, width, exponent_scale, new_max, p);
      if (correction != 1.0f) {
        scale_row(acc + r * dv, dv, correction);
      }
      row_sum[r] = row_sum[r] * correction + block_sum;
      row_max[r] = new_max;
    }
    products.accumulate(rows, k0, k1, width, dv, probs, acc);
  }

  const int64_t element = c10::elementSize(args.out_dtype);
  for (int64_t r = 0; r < rows; ++r) {
    char* out = static_cast<char*>(args.out) +
                (b * args.o_sb + head_of(r) * args.o_sh + position_of(r) * args.o_ss) * element;
    store_row(args, out, acc + r * dv, row_sum[r], scratch.staging.data());
  }
}

template <class Products>
void attention_with(const AttentionArgs& args) {
  const Window window{args.seq_k - args.seq_q, args.window_left, args.window_right,
                      args.seq_k};
  const int64_t positions = task_positions(args);
  const int64_t rows = args.heads_q / args.heads_kv * positions;
  const int64_t q_blocks = (args.seq_q + positions - 1) / positions;
  const int64_t tasks = args.batch * args.heads_kv * q_blocks;
  // Causal blocks near the end of the sequence cost more than those near the
  // start; dealing tasks round-robin gives every thread a similar mix (a
  // contiguous split would give one thread all the long rows of a head).
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), tasks));
  at::parallel_for(0, workers, 1, [&](int64_t begin, int64_t end) {
    Scratch scratch(args, rows, positions);
    if constexpr (!std::is_same_v<typename Products::Prob, float>) {
      scratch.probs.resize(rows * kKeyBlock);
    }
    for (int64_t worker = begin; worker < end; ++worker) {
      for (int64_t task = worker; task < tasks; task += workers) {
        const int64_t qb = task % q_blocks;
        const int64_t bh = task / q_blocks;
        attention_task<Products>(args, window, bh / args.heads_kv, bh % args.heads_kv,
                                 qb * positions, positions, scratch);
      }
    }
    if constexpr (requires { Products::release(); }) {
      Products::release();
    }
  });
}

void attention(const AttentionArgs& args) {
  attention_with<FloatProducts>(args);
}

// ---- the decode path: few query rows against a long KV cache ----------------
//
// One task per (batch, KV head): its G = Hq / Hkv query heads x Sq positions
// are the task's rows, so each key and value row is loaded (and widened to
// float) once and used by every row. Per key block: scores by dot products,
// the same masking and online softmax as the blocked path, then O += P V.

inline float dot(const float* a, const float* b, int64_t n) {
  V acc0(0.0f);
  V acc1(0.0f);
  int64_t j = 0;
  for (; j + 2 * kVec <= n; j += 2 * kVec) {
    acc0 = at::vec::fmadd(V::loadu(a + j), V::loadu(b + j), acc0);
    acc1 = at::vec::fmadd(V::loadu(a + j + kVec), V::loadu(b + j + kVec), acc1);
  }
  if (j + kVec <= n) {
    acc0 = at::vec::fmadd(V::loadu(a + j), V::loadu(b + j), acc0);
    j += kVec;
  }
  float sum = reduce_sum(acc0 + acc1);
  for (; j < n; ++j) {
    sum += a[j] * b[j];
  }
  return sum;
}

// acc += p * row over n floats.
inline void axpy(float* acc, const float* row, float p, int64_t n) {
  const V vp(p);
  int64_t j = 0;
  for (; j + kVec <= n; j += kVec) {
    at::vec::fmadd(vp, V::loadu(row + j), V::loadu(acc + j)).store(acc + j);
  }
  for (; j < n; ++j) {
    acc[j] += p * row[j];
  }
}

// Row `index` of a [.., n] tensor of `dtype` as float: a pointer into the
// tensor itself for float32, else widened into `buffer`.
inline const float* float_row(const void* base, int64_t offset, c10::ScalarType dtype, int64_t n,
                              float* buffer) {
  switch (dtype) {
    case c10::ScalarType::BFloat16:
      at::vec::convert(static_cast<const c10::BFloat16*>(base) + offset, buffer, n);
      return buffer;
    case c10::ScalarType::Half:
      at::vec::convert(static_cast<const c10::Half*>(base) + offset, buffer, n);
      return buffer;
    default:
      return static_cast<const float*>(base) + offset;
  }
}

void decode_task(const AttentionArgs& args, const Window& window, int64_t b, int64_t hk,
                 std::vector<float>& buffer) {
  const int64_t group = args.heads_q / args.heads_kv;
  const int64_t rows = group * args.seq_q;
  const int64_t d = args.head_dim;
  const int64_t dv = args.head_dim_v;
  // scores [rows x kKeyBlock] | acc [rows x dv] | max, sum [rows] | k row | v row | staging
  buffer.resize(rows * (kKeyBlock + dv + 2) + d + 2 * dv);
  float* scores = buffer.data();
  float* acc = scores + rows * kKeyBlock;
  float* row_max = acc + rows * dv;
  float* row_sum = row_max + rows;
  float* k_buffer = row_sum + rows;
  float* v_buffer = k_buffer + d;
  float* staging = v_buffer + dv;
  std::fill_n(acc, rows * dv, 0.0f);
  std::fill_n(row_max, rows, kNegInf);
  std::fill_n(row_sum, rows, 0.0f);
  auto head_of = [&](int64_t r) { return hk * group + r / args.seq_q; };
  auto position_of = [&](int64_t r) { return r % args.seq_q; };
  auto q_row = [&](int64_t r) {
    return args.q + b * args.q_sb + head_of(r) * args.q_sh + position_of(r) * args.q_ss;
  };
  const int64_t k_base = b * args.k_sb + hk * args.k_sh;
  const int64_t v_base = b * args.v_sb + hk * args.v_sh;
  const int64_t keys_begin = window.lo(0);
  const int64_t keys_end = window.hi(args.seq_q - 1);
  for (int64_t k0 = keys_begin; k0 < keys_end; k0 += kKeyBlock) {
    const int64_t k1 = std::min(k0 + kKeyBlock, keys_end);
    for (int64_t j = k0; j < k1; ++j) {
      const float* key = float_row(args.k_raw, k_base + j * args.k_ss, args.kv_dtype, d, k_buffer);
      for (int64_t r = 0; r < rows; ++r) {
        scores[r * kKeyBlock + (j - k0)] = dot(q_row(r), key, d);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * kKeyBlock;
      const int64_t i = position_of(r);
      const int64_t lo = std::clamp(window.lo(i), k0, k1) - k0;
      const int64_t hi = std::clamp(window.hi(i), k0, k1) - k0;
      if (lo >= hi) {
        std::fill(s, s + (k1 - k0), 0.0f);
        continue;
      }
      std::fill(s, s + lo, 0.0f);
      std::fill(s + hi, s + (k1 - k0), 0.0f);
      const float* mask_row =
          args.mask == nullptr
              ? nullptr
              : args.mask + b * args.m_sb + head_of(r) * args.m_sh + i * args.m_ss + k0;
      const float block_max = prepare_scores(s, lo, hi, mask_row, args.scale, args.softcap);
      const float new_max = std::max(row_max[r], block_max);
      if (new_max == kNegInf) {
        std::fill(s + lo, s + hi, 0.0f);
        continue;
      }
      const float correction = std::exp(row_max[r] - new_max);
      const float block_sum = exponentiate(s, lo, hi, new_max);
      if (correction != 1.0f) {
        scale_row(acc + r * dv, dv, correction);
      }
      row_sum[r] = row_sum[r] * correction + block_sum;
      row_max[r] = new_max;
    }
    for (int64_t j = k0; j < k1; ++j) {
      const float* value =
          float_row(args.v_raw, v_base + j * args.v_ss, args.kv_dtype, dv, v_buffer);
      for (int64_t r = 0; r < rows; ++r) {
        const float p = scores[r * kKeyBlock + (j - k0)];
        if (p != 0.0f) {
          axpy(acc + r * dv, value, p, dv);
        }
      }
    }
  }
  const int64_t element = c10::elementSize(args.out_dtype);
  for (int64_t r = 0; r < rows; ++r) {
    char* out = static_cast<char*>(args.out) +
                (b * args.o_sb + head_of(r) * args.o_sh + position_of(r) * args.o_ss) * element;
    store_row(args, out, acc + r * dv, row_sum[r], staging);
  }
}

void decode(const AttentionArgs& args) {
  const Window window{args.seq_k - args.seq_q, args.window_left, args.window_right,
                      args.seq_k};
  const int64_t tasks = args.batch * args.heads_kv;
  at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer;
    for (int64_t task = begin; task < end; ++task) {
      decode_task(args, window, task / args.heads_kv, task % args.heads_kv, buffer);
    }
  });
}

#define FLASH_ATTN2_STRINGIFY_(x) #x
#define FLASH_ATTN2_STRINGIFY(x) FLASH_ATTN2_STRINGIFY_(x)

#ifdef FLASH_ATTN2_BF16_DOT
void attention_bf16(const AttentionArgs& args) {
  attention_with<Bf16Products>(args);
}
constexpr KernelTable kTable{FLASH_ATTN2_STRINGIFY(CPU_CAPABILITY), &attention, &decode,
                             &attention_bf16};
#else
constexpr KernelTable kTable{FLASH_ATTN2_STRINGIFY(CPU_CAPABILITY), &attention, &decode,
                             nullptr};
#endif

}  // namespace

const KernelTable* FLASH_ATTN2_KERNEL_TABLE() {
  return &kTable;
}

#ifdef FLASH_ATTN2_BRGEMM_TABLE
namespace {
// Head dims that are whole AMX tiles (32 bf16) only, the shapes ATen's own
// flash attention packs for; other dims take the VDPBF16PS loops.
void attention_brgemm(const AttentionArgs& args) {
  if (args.head_dim % 32 == 0 && args.head_dim_v % 32 == 0) {
    attention_with<BrgemmProducts>(args);
  } else {
    attention_with<Bf16Products>(args);
  }
}
constexpr KernelTable kBrgemmTable{"BRGEMM_BF16", &attention, &decode, &attention_brgemm};
}  // namespace

const KernelTable* FLASH_ATTN2_BRGEMM_TABLE() {
  return &kBrgemmTable;
}
#endif

}  // namespace flash_attn2_cpu
