// AVX-512 pieces of the loops for the AVX512 and AVX512_BF16 copies
// (kernels_impl.h includes this where CPU_CAPABILITY_AVX512 is defined):
//
// * sigmoid_product(x, -z) = x * sigmoid(z), as x * (1 / (1 + exp(-z))), with
//   an exp of nine instructions (VSCALEFPS does the 2^n scaling, overflow and
//   underflow included) and the reciprocal as VRCP14PS plus one Newton step
//   instead of VDIVPS, whose throughput (one per several cycles on Zen 4)
//   bounded the loops. Error about 20 ulp (the polynomial of at::vec's
//   exp_u20, the bound the ops promised before), far inside the 1e-5
//   tolerance of float results; double keeps at::vec's precise exp. Results
//   rounded to bf16 take a shorter exp and no Newton step (see below).
// * bf16 in 32-value steps: the even and odd elements widened by a shift and
//   a mask (no shuffle), and rounding to nearest even on the way back. With
//   ACTIVATION_HW_BF16 (the avx512_bf16 copy) the rounding is VCVTNE2PS2BF16
//   whenever it gives torch's bits: the instruction flushes subnormal inputs
//   and results to zero (torch keeps them), so a step holding a subnormal
//   float takes the bit arithmetic. A NaN stays a NaN on both paths, with
//   its sign and payload (torch's own conversion writes 0x7FC0 or 0xFFFF).
#pragma once

#include <c10/util/BFloat16.h>

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace activation_cpu {
namespace {
namespace avx512 {

#ifdef ACTIVATION_HW_BF16
constexpr bool kHardwareRounding = true;
#else
constexpr bool kHardwareRounding = false;
#endif

// exp(z) for z in [-88, 88] (callers clamp): z = n ln2 + r, |r| <= ln2 / 2,
// exp(r) by a polynomial, times 2^n by VSCALEFPS. One float constant for ln 2
// suffices: FMA forms n * ln2f exactly, and |ln2f - ln 2| * 127 < 2.5e-7.
// kForBf16: Taylor to degree 4 (relative error < 4.3e-5 on |r| <= ln2 / 2),
// else exp_u20's degree-5 polynomial (about 20 ulp).
template <bool kForBf16>
inline __m512 exp_clamped(__m512 z) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(z, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147182f), z);
  __m512 p;
  if constexpr (kForBf16) {
    p = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 24), _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
  } else {
    p = _mm512_fmadd_ps(r, _mm512_set1_ps(0.00828929059f), _mm512_set1_ps(0.0418978221f));
    p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.166676521f));
    p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.499991506f));
    p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.999999701f));
  }
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// x * sigmoid(z) with `neg_z` = -z. -z is clamped to [-88, 88]: exp(88) ~
// 1.7e38 already makes the product vanish to within float resolution, and
// exp(-88) vanishes next to 1. A NaN z becomes a finite clamp, but x (NaN
// with it in every caller) carries the NaN to the result. The reciprocal of
// d = 1 + exp(-z) >= 1 is VRCP14PS (relative error < 2^-14). For float
// results it is refined once: r1 = r0 + r0 (1 - d r0), so x = inf with d = 1
// gives inf (refining the quotient instead would give inf - inf).
// kForBf16 (the result is rounded to bf16, whose half ulp is 2^-9): no
// refinement and the shorter exp, together under 1.1e-4 relative, so a
// result lies within 0.53 ulp of the exact value (float: 0.5 ulp plus the
// float error) and stays far inside the 1e-2 tolerance of bf16 results.
template <bool kForBf16>
inline __m512 sigmoid_product(__m512 x, __m512 neg_z) {
  const __m512 z = _mm512_min_ps(_mm512_max_ps(neg_z, _mm512_set1_ps(-88.0f)),
                                 _mm512_set1_ps(88.0f));
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_clamped<kForBf16>(z));
  const __m512 r0 = _mm512_rcp14_ps(d);
  if constexpr (kForBf16) {
    return _mm512_mul_ps(x, r0);
  }
  const __m512 r1 = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(d, r0, _mm512_set1_ps(1.0f)), r0);
  return _mm512_mul_ps(x, r1);
}

// ---- bf16, 32 values at a time ------------------------------------------------

// Lanes [0, left) of a 32-lane bf16 vector.
inline __mmask32 first32(int64_t left) {
  return left >= 32 ? ~__mmask32(0) : __mmask32((uint32_t{1} << left) - 1u);
}

// 32 consecutive bf16 values as floats: even elements, odd elements.
struct Pair {
  __m512 even;
  __m512 odd;
};

inline Pair load(const c10::BFloat16* p, __mmask32 lanes) {
  const __m512i words = _mm512_maskz_loadu_epi16(lanes, p);
  return {_mm512_castsi512_ps(_mm512_slli_epi32(words, 16)),
          _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(int(0xFFFF0000u))))};
}

// Round to nearest even, the result in the high 16 bits. A NaN needs no
// special case here: every NaN these loops round is a widened bf16 input
// (quieted or not) or the CPU's default NaN, so its low 16 bits are zero and
// the bias (at most 0x8000) cannot carry it into inf or flip its sign.
inline __m512i round_high(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
}

inline __m512i join_bits(const Pair& p) {
  return _mm512_or_si512(
      _mm512_srli_epi32(round_high(p.even), 16),
      _mm512_and_si512(round_high(p.odd), _mm512_set1_epi32(int(0xFFFF0000u))));
}

// The 32 values of p rounded to bf16, in element order.
inline __m512i join(const Pair& p) {
#ifdef ACTIVATION_HW_BF16
  // fpclass 0x20: subnormal (flushed by the instruction).
  if ((_mm512_fpclass_ps_mask(p.even, 0x20) | _mm512_fpclass_ps_mask(p.odd, 0x20)) == 0) {
    // VCVTNE2PS2BF16 writes the 16 even values, then the 16 odd ones.
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                           24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                           1, 16, 0);
    const __m512bh rounded = _mm512_cvtne2ps_pbh(p.odd, p.even);
    __m512i bits;
    std::memcpy(&bits, &rounded, sizeof(bits));
    return _mm512_permutexvar_epi16(order, bits);
  }
#endif
  return join_bits(p);
}

inline void store(c10::BFloat16* p, __mmask32 lanes, const Pair& values) {
  _mm512_mask_storeu_epi16(p, lanes, join(values));
}

// step(lanes, i) for each 32-value step of [0, n): whole steps, then the rest.
template <typename Step>
inline void for_each_step(int64_t n, const Step& step) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    step(~__mmask32(0), i);
  }
  if (i < n) {
    step(first32(n - i), i);
  }
}

}  // namespace avx512
}  // namespace
}  // namespace activation_cpu
