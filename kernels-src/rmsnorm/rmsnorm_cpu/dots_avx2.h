// swiglu_mlp's float32 and bf16 matrix-vector products with AVX2 intrinsics, for the
// AVX2 and AVX-512 copies of the loops (RMSNORM_DOTS_AVX2).
//
// A decode step is bound by memory bandwidth, and one core reaches it only with
// several streams in flight: the plain loop (kernels_impl.h: dot_rows), one weight
// row at a time, read ~11 GB/s on the AVX2 machine (AMD EPYC) where the BLAS GEMV
// reads ~18, and four rows at a time read 19-24 (a standalone sweep of 1-8 rows:
// 2 rows 15, 3 rows 17, 4 rows 19-24, 8 rows no better at the smaller sizes). So
// each pass reads up to four weight rows (kernels_impl.h: kWeightRows) side by side
// against every row of x. Rows of x after the first meet the weights in L1: the row
// is walked in chunks of kChunk values, each chunk multiplied by every row of x
// before the next, the partial sums kept in memory between chunks.
//
// Every sum keeps lane_sum's 32 lanes (four vectors of eight) and its fold, products
// rounded before they are added (no FMA), so the results are the plain loop's bit
// for bit. The AVX-512 copies run these 256-bit loops too: they are the ones tested
// on AVX2 machines, and the limit is memory, not vector width.
#pragma once

#include "gated_avx2.h"
#include "kernels.h"
#include "scalar.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace rmsnorm_cpu {
namespace {
namespace dots_avx2 {

using gated_avx2::hsum;
using gated_avx2::load8;

// The storage types these loops read (weights; x is already widened to float).
template <typename T>
constexpr bool kHandles = std::is_same_v<T, float> || std::is_same_v<T, bf16_t>;

// Rows of x per pass over the weights (the op's few rows: GEMV_MAX_ROWS).
constexpr int64_t kXRows = 4;
// Values of a weight row per chunk when x has several rows: four rows' chunks
// (4 KiB of float32) stay in L1 while every row of x passes over them.
constexpr int64_t kChunk = 256;

// 32 partial sums: four vectors of eight (lanes 0-7, 8-15, 16-23, 24-31).
struct Lanes {
  __m256 v[4];
};

// acc[r] += w_r[i:i+32] * x[i:i+32] for the whole blocks of [begin, end). The sums
// are copied in and out: a vector type may alias the floats read, so through the
// reference GCC would store them on every block.
template <int R, typename T>
inline void add_blocks(const T* w, int64_t ldw, const float* x, int64_t begin, int64_t end,
                       Lanes (&kept)[R]) {
  Lanes acc[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = kept[r];
  }
  for (int64_t i = begin; i < end; i += 32) {
    // bf16: prefetch the same 64 bytes of the next pass's weight rows. Without it short
    // rows that come from memory (an lm_head's 1024 values) read ~9 GB/s; with it the
    // 1-row product is 1.04-1.34x faster at 1024x3072 ... 1024x151936, swiglu_mlp's
    // 1.12-1.58x (AMD EPYC; float32 was not measured with it and keeps the plain loop).
    if constexpr (std::is_same_v<T, bf16_t>) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * ldw + i), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256 xv = _mm256_loadu_ps(x + i + 8 * k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 product = _mm256_mul_ps(load8(w + r * ldw + i + 8 * k), xv);
        acc[r].v[k] = _mm256_add_ps(acc[r].v[k], product);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    kept[r] = acc[r];
  }
}

// The last `left` (< 32) values from `i`: lane j gains term j for j < left only, as
// lane_sum's tail leaves the other lanes as they are.
template <int R, typename T>
inline void add_tail(const T* w, int64_t ldw, const float* x, int64_t i, int64_t left,
                     Lanes (&acc)[R]) {
  alignas(32) float xs[32] = {};
  alignas(32) float ws[R][32] = {};
  for (int64_t j = 0; j < left; ++j) {
    xs[j] = x[i + j];
    for (int r = 0; r < R; ++r) {
      ws[r][j] = widen(w[r * ldw + i + j]);
    }
  }
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int k = 0; k < 4; ++k) {
    const __m256 taken = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left - 8 * k)), index));
    const __m256 xv = _mm256_load_ps(xs + 8 * k);
    for (int r = 0; r < R; ++r) {
      const __m256 sum =
          _mm256_add_ps(acc[r].v[k], _mm256_mul_ps(_mm256_load_ps(ws[r] + 8 * k), xv));
      acc[r].v[k] = _mm256_blendv_ps(acc[r].v[k], sum, taken);
    }
  }
}

// lane_sum's fold: lanes j += j + 16, then j += j + 8, then within eight (hsum).
inline float fold(const Lanes& acc) {
  const __m256 half = _mm256_add_ps(_mm256_add_ps(acc.v[0], acc.v[2]),
                                    _mm256_add_ps(acc.v[1], acc.v[3]));
  return hsum(half);
}

// out[r * ldo + m] = w_r . x_m for r < R (w_r = w + r * n) and m < rows (<= kXRows,
// x_m = x + m * n).
template <int R, typename T>
void dots_of(const T* w, const float* x, int64_t rows, int64_t n, float* out, int64_t ldo) {
  const int64_t whole = n - n % 32;
  const int64_t chunk = rows == 1 ? std::max<int64_t>(whole, 1) : kChunk;
  Lanes kept[kXRows][R];
  for (int64_t m = 0; m < rows; ++m) {
    for (int r = 0; r < R; ++r) {
      for (int k = 0; k < 4; ++k) {
        kept[m][r].v[k] = _mm256_setzero_ps();
      }
    }
  }
  for (int64_t begin = 0; begin < whole; begin += chunk) {
    const int64_t end = std::min(begin + chunk, whole);
    for (int64_t m = 0; m < rows; ++m) {
      add_blocks<R>(w, n, x + m * n, begin, end, kept[m]);
    }
  }
  for (int64_t m = 0; m < rows; ++m) {
    if (whole < n) {
      add_tail<R>(w, n, x + m * n, whole, n - whole, kept[m]);
    }
    for (int r = 0; r < R; ++r) {
      out[r * ldo + m] = fold(kept[m][r]);
    }
  }
}

// out[r * rows + m] = w_r . x_m for the `count` weight rows from `w` (1 to 4)
// and every row of x (`rows` rows of `n` floats).
template <typename T>
inline void dots(const T* w, int64_t count, const float* x, int64_t rows, int64_t n,
                 float* out) {
  for (int64_t m0 = 0; m0 < rows; m0 += kXRows) {
    const int64_t part = std::min(kXRows, rows - m0);
    const float* xm = x + m0 * n;
    float* o = out + m0;
    switch (count) {
      case 1:
        dots_of<1>(w, xm, part, n, o, rows);
        break;
      case 2:
        dots_of<2>(w, xm, part, n, o, rows);
        break;
      case 3:
        dots_of<3>(w, xm, part, n, o, rows);
        break;
      default:
        dots_of<4>(w, xm, part, n, o, rows);
        break;
    }
  }
}

}  // namespace dots_avx2
}  // namespace
}  // namespace rmsnorm_cpu
