// bfloat16 on AVX-512 registers for the bf16 rows (bf16_rows.h): loads
// that widen to float, narrow<bf16_t>'s rounding (round to nearest even,
// NaN to 0x7FC0) on 16 or 32 lanes, and lane_sum's 32-lane sum. With
// LAYERNORM_HW_BF16 defined (the avx512_bf16 copy) the rounding uses
// VCVTNEPS2BF16/VCVTNE2PS2BF16 where that gives the same bits.
#pragma once

#include "scalar.h"

#include <immintrin.h>

#include <bit>
#include <cstdint>

namespace layernorm_cpu {
namespace {
namespace bf16_vec {

// Whether this copy rounds with VCVTNE(2)PS2BF16 (the avx512_bf16 copy).
#ifdef LAYERNORM_HW_BF16
constexpr bool kHardwareRounding = true;
#else
constexpr bool kHardwareRounding = false;
#endif

// Lanes [0, left) of a 16-lane vector.
inline __mmask16 first(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}

inline __m512 widen(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

inline __m512 load(const bf16_t* p, __mmask16 lanes) {
  return widen(_mm256_maskz_loadu_epi16(lanes, p));
}

// narrow<bf16_t> on 16 lanes: round to nearest even, NaN to 0x7FC0.
inline __m256i narrow_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                                  _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(rounded);
}

// The same rounding. VCVTNEPS2BF16 also rounds to nearest even, but flushes
// subnormal inputs and results to zero (torch keeps them) and keeps a NaN's
// sign and payload: rare vectors with either take the bit arithmetic.
inline __m256i narrow(__m512 v) {
#ifdef LAYERNORM_HW_BF16
  // fpclass 0x20: subnormal; 0x01 | 0x80: quiet or signalling NaN.
  if (_mm512_fpclass_ps_mask(v, 0xA1) == 0) {
    return std::bit_cast<__m256i>(_mm512_cvtneps_pbh(v));
  }
#endif
  return narrow_bits(v);
}

// lane_sum's fold of its 32 partial sums (acc0: lanes 0-15, acc1: 16-31).
inline float fold(__m512 acc0, __m512 acc1) {
  const __m512 v16 = _mm512_add_ps(acc0, acc1);
  const __m256 v8 =
      _mm256_add_ps(_mm512_castps512_ps256(v16),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v16), 1)));
  const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1)));
}

// lane_sum over [0, n) of term(i, lanes) (16 elements from i, `lanes` of them
// valid), adding products without FMA as the plain loops do.
template <typename Term>
inline float lane_sum(int64_t n, const Term& term) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_add_ps(acc0, term(i, __mmask16(0xFFFF)));
    acc1 = _mm512_add_ps(acc1, term(i + 16, __mmask16(0xFFFF)));
  }
  if (i < n) {
    const __mmask16 low = first(n - i);
    acc0 = _mm512_mask_add_ps(acc0, low, acc0, term(i, low));
    if (i + 16 < n) {
      const __mmask16 high = first(n - i - 16);
      acc1 = _mm512_mask_add_ps(acc1, high, acc1, term(i + 16, high));
    }
  }
  return fold(acc0, acc1);
}

// Whether every value of w[0, n) is finite (no inf, no NaN).
inline bool all_finite(const bf16_t* w, int64_t n) {
  __mmask32 special = 0;
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 lanes = n - i >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - i)) - 1u);
    const __m512i bits = _mm512_maskz_loadu_epi16(lanes, w + i);
    // exponent all ones: inf or NaN
    special |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(bits, _mm512_set1_epi16(0x7F80)),
                                       _mm512_set1_epi16(0x7F80));
  }
  return special == 0;
}

// 32 consecutive bf16 values as floats: even elements in one vector, odd
// ones in the other, two instructions for 32 values (no widening shuffle).
struct Pair {
  __m512 even;
  __m512 odd;
};

inline Pair split(__m512i words) {
  return {_mm512_castsi512_ps(_mm512_slli_epi32(words, 16)),
          _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(int(0xFFFF0000u))))};
}

// narrow<bf16_t>'s rounding for NaN-free v: the result in the high 16 bits.
inline __m512i round_high(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
}

// The 32 values of p rounded to bf16, in element order (p NaN-free).
inline __m512i join_bits(const Pair& p) {
  return _mm512_or_si512(_mm512_srli_epi32(round_high(p.even), 16),
                         _mm512_and_si512(round_high(p.odd), _mm512_set1_epi32(int(0xFFFF0000u))));
}

// join_bits, with VCVTNE2PS2BF16 where available: p must then hold no
// subnormal value either (the instruction flushes them to zero).
inline __m512i join(const Pair& p) {
#ifdef LAYERNORM_HW_BF16
  // VCVTNE2PS2BF16 writes the even values, then the odd ones: interleave.
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
  return _mm512_permutexvar_epi16(order,
                                  std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(p.odd, p.even)));
#else
  return join_bits(p);
#endif
}

}  // namespace bf16_vec
}  // namespace
}  // namespace layernorm_cpu
