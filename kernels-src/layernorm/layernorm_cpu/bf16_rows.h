// The bf16 forward rows with AVX-512 intrinsics, for the AVX512 and
// AVX512_BF16 copies of the loops. GCC vectorizes the plain loops of
// kernels_impl.h for bf16 too, but its widening, bit-arithmetic rounding and
// narrowing cost several instructions per value. Here the mean and variance
// keep lane_sum's 32 lanes and order; the normalizing pass reads 32 values as
// two float vectors (even and odd elements: a shift and a mask, no shuffle)
// and rounds with VCVTNE2PS2BF16 where LAYERNORM_HW_BF16 is defined (the
// avx512_bf16 copy), else with narrow<bf16_t>'s bit arithmetic. Rows that
// could produce a NaN take the plain loop, and blocks with a subnormal result
// (which the instruction would flush) the bit arithmetic, so every copy gives
// identical bits.
#pragma once

#include "bf16_vec.h"
#include "kernels.h"
#include "scalar.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace layernorm_cpu {
namespace {

// The plain loop (kernels_impl.h), for rows these loops leave to it.
template <typename T>
inline void normalize_row(const T* __restrict x, const T* __restrict w, const T* __restrict b,
                          T* out, int64_t n, acc_t<T> mean, acc_t<T> rstd);

namespace bf16_rows {

using namespace bf16_vec;

// moments<bf16_t>: the same two sums in the same order.
inline void moments(const bf16_t* x, int64_t n, double eps, float& mean, float& rstd) {
  mean = lane_sum(n, [&](int64_t i, __mmask16 lanes) { return load(x + i, lanes); }) / float(n);
  const __m512 m = _mm512_set1_ps(mean);
  const float var = lane_sum(n,
                             [&](int64_t i, __mmask16 lanes) {
                               const __m512 d = _mm512_sub_ps(load(x + i, lanes), m);
                               return _mm512_mul_ps(d, d);
                             }) /
                    float(n);
  rstd = 1.0f / std::sqrt(var + float(eps));
}

// normalize_row<bf16_t> 32 elements at a time, for a row in which no NaN arises.
template <bool kWeight, bool kBias>
inline void normalize_row(const bf16_t* x, const bf16_t* w, const bf16_t* b, bf16_t* out,
                          int64_t n, float mean, float rstd) {
  const __m512 m = _mm512_set1_ps(mean);
  const __m512 r = _mm512_set1_ps(rstd);
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 lanes = n - i >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - i)) - 1u);
    const Pair xs = split(_mm512_maskz_loadu_epi16(lanes, x + i));
    Pair y{_mm512_mul_ps(_mm512_sub_ps(xs.even, m), r), _mm512_mul_ps(_mm512_sub_ps(xs.odd, m), r)};
    if constexpr (kWeight) {
      const Pair ws = split(_mm512_maskz_loadu_epi16(lanes, w + i));
      y = {_mm512_mul_ps(y.even, ws.even), _mm512_mul_ps(y.odd, ws.odd)};
    }
    if constexpr (kBias) {
      const Pair bs = split(_mm512_maskz_loadu_epi16(lanes, b + i));
      y = {_mm512_add_ps(y.even, bs.even), _mm512_add_ps(y.odd, bs.odd)};
    }
    // fpclass 0x20: subnormal, which VCVTNE2PS2BF16 would flush to zero.
    const bool flushed = kHardwareRounding && (_mm512_fpclass_ps_mask(y.even, 0x20) |
                                               _mm512_fpclass_ps_mask(y.odd, 0x20)) != 0;
    _mm512_mask_storeu_epi16(out + i, lanes, flushed ? join_bits(y) : join(y));
  }
}

// forward_rows<bf16_t>, row by row with the same operations in the same order.
inline void forward_rows(const ForwardArgs& args, int64_t begin, int64_t end) {
  const int64_t n = args.hidden;
  const bf16_t* w = static_cast<const bf16_t*>(args.weight);
  const bf16_t* b = static_cast<const bf16_t*>(args.bias);
  // With finite w and b, and a finite mean and finite positive rstd, every
  // (x - mean) is finite and so no result is NaN.
  const bool affine_finite =
      (w == nullptr || all_finite(w, n)) && (b == nullptr || all_finite(b, n));
  for (int64_t row = begin; row < end; ++row) {
    const bf16_t* x = static_cast<const bf16_t*>(args.x) + row * n;
    bf16_t* out = static_cast<bf16_t*>(args.out) + row * n;
    float mean, rstd;
    moments(x, n, args.eps, mean, rstd);
    if (!(affine_finite && std::isfinite(mean) && rstd > 0.0f && rstd < INFINITY)) {
      layernorm_cpu::normalize_row<bf16_t>(x, w, b, out, n, mean, rstd);
    } else if (w != nullptr && b != nullptr) {
      normalize_row<true, true>(x, w, b, out, n, mean, rstd);
    } else if (w != nullptr) {
      normalize_row<true, false>(x, w, b, out, n, mean, rstd);
    } else if (b != nullptr) {
      normalize_row<false, true>(x, w, b, out, n, mean, rstd);
    } else {
      normalize_row<false, false>(x, w, b, out, n, mean, rstd);
    }
  }
}

}  // namespace bf16_rows
}  // namespace
}  // namespace layernorm_cpu
