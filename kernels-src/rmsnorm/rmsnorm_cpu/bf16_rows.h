// The bf16 forward rows with AVX-512 intrinsics, for the AVX512 and
// AVX512_BF16 copies of the loops. GCC vectorizes the plain loops of
// kernels_impl.h for bf16 too, but its widening, bit-arithmetic rounding and
// narrowing cost about one cycle per element (1.1 us per 4096-element row on
// one Zen 4 core, six times a copy). Here the sum of squares keeps
// lane_sum's 32 lanes and order; the scaling pass reads 32 values as two
// float vectors (even and odd elements: a shift and a mask, no shuffle) and
// rounds with VCVTNE2PS2BF16 where RMSNORM_HW_BF16 is defined (the
// avx512_bf16 copy), else with narrow<bf16_t>'s bit arithmetic. Rows where
// the shortcuts could round differently (a NaN, or for the instruction a
// subnormal) take the plain loop, so every copy gives identical bits.
#pragma once

#include "bf16_vec.h"
#include "kernels.h"
#include "scalar.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace rmsnorm_cpu {
namespace {

// The plain loop (kernels_impl.h), for rows and blocks these loops leave to it.
template <typename T>
inline void scale_row(const T* __restrict x, const T* __restrict w, T* out, int64_t n,
                      acc_t<T> rstd, bool unit_offset);

namespace bf16_rows {

using namespace bf16_vec;

// scale_row<bf16_t> 32 elements at a time, for a row in which no NaN and (for
// VCVTNEPS2BF16) no subnormal value arises.
template <bool kUnitOffset>
inline void scale_row(const bf16_t* x, const bf16_t* w, bf16_t* out, int64_t n, float rstd) {
  const __m512 scale = _mm512_set1_ps(rstd);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 lanes = n - i >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - i)) - 1u);
    const Pair xs = split(_mm512_maskz_loadu_epi16(lanes, x + i));
    const Pair ws = split(_mm512_maskz_loadu_epi16(lanes, w + i));
    Pair y;
    if constexpr (kUnitOffset) {
      y = {_mm512_mul_ps(_mm512_mul_ps(xs.even, scale), _mm512_add_ps(one, ws.even)),
           _mm512_mul_ps(_mm512_mul_ps(xs.odd, scale), _mm512_add_ps(one, ws.odd))};
    } else {
      // Llama: w * round(x * rstd).
      const Pair normed =
          split(join({_mm512_mul_ps(xs.even, scale), _mm512_mul_ps(xs.odd, scale)}));
      y = {_mm512_mul_ps(ws.even, normed.even), _mm512_mul_ps(ws.odd, normed.odd)};
    }
    _mm512_mask_storeu_epi16(out + i, lanes, join(y));
  }
}

// The smallest nonzero magnitude of 16 bf16 values and `so_far`, kept as
// bits - 1 (unsigned 16-bit min; zeros and masked-off lanes become 0xFFFF).
inline __m256i min_magnitude(__m256i bits, __m256i so_far) {
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi16(0x7FFF));
  return _mm256_min_epu16(so_far, _mm256_sub_epi16(magnitude, _mm256_set1_epi16(1)));
}

// The float value of min_magnitude's lanes' minimum (infinity when all were zero).
inline float smallest(__m256i so_far) {
  const __m128i m8 = _mm_min_epu16(_mm256_castsi256_si128(so_far),
                                   _mm256_extracti128_si256(so_far, 1));
  const __m128i m1 = _mm_minpos_epu16(m8);
  const uint32_t bits = static_cast<uint32_t>(_mm_extract_epi16(m1, 0)) + 1u;
  return bits > 0xFFFFu ? INFINITY : std::bit_cast<float>(bits << 16);
}

// Whether no product of a row can be subnormal (VCVTNEPS2BF16 would flush it
// to zero): |x * rstd| and |w * round(x * rstd)| (or |x * rstd * (1 + w)|)
// stay at least 2^-126 for the smallest nonzero factors, with a factor 2 to
// spare for the rounding in between. In double, so the test itself cannot underflow.
inline bool flush_free(float min_x, float rstd, float min_w) {
  if constexpr (!kHardwareRounding) {
    return true;
  }
  const double smallest_normal = 0x1.0p-126;
  const double normed = double(min_x) * double(rstd);
  return normed >= 2 * smallest_normal &&
         normed * std::min(1.0, double(min_w)) >= 2 * smallest_normal;
}

// The smallest nonzero |w| (or |1 + w| for unit_offset); infinity when none.
inline float smallest_factor(const bf16_t* w, int64_t n, bool unit_offset) {
  float found = INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    const float wi = rmsnorm_cpu::widen(w[i]);
    const float v = std::fabs(unit_offset ? 1.0f + wi : wi);
    found = v != 0.0f && v < found ? v : found;
  }
  return found;
}

// forward_rows<bf16_t>, row by row with the same operations in the same order.
inline void forward_rows(const ForwardArgs& args, int64_t begin, int64_t end) {
  const int64_t n = args.hidden;
  const bf16_t* w = static_cast<const bf16_t*>(args.weight);
  const bool w_finite = all_finite(w, n);
  // Only the hardware rounding needs the bounds of flush_free.
  const float min_w = kHardwareRounding ? smallest_factor(w, n, args.unit_offset) : 0.0f;
  for (int64_t row = begin; row < end; ++row) {
    const bf16_t* x = static_cast<const bf16_t*>(args.x) + row * n;
    bf16_t* out = static_cast<bf16_t*>(args.out) + row * n;
    float sum_squares;
    __m256i min_x = _mm256_set1_epi16(-1);
    if (args.residual != nullptr) {
      // One pass: s = round(x + residual) is stored and its square summed.
      const bf16_t* res = static_cast<const bf16_t*>(args.residual) + row * n;
      bf16_t* s = static_cast<bf16_t*>(args.sum) + row * n;
      sum_squares = lane_sum(n, [&](int64_t i, __mmask16 lanes) {
        const __m256i bits = narrow(_mm512_add_ps(load(x + i, lanes), load(res + i, lanes)));
        _mm256_mask_storeu_epi16(s + i, lanes, bits);
        if constexpr (kHardwareRounding) {
          min_x = min_magnitude(bits, min_x);
        }
        const __m512 v = widen(bits);
        return _mm512_mul_ps(v, v);
      });
      x = s;
    } else {
      sum_squares = lane_sum(n, [&](int64_t i, __mmask16 lanes) {
        const __m256i bits = _mm256_maskz_loadu_epi16(lanes, x + i);
        if constexpr (kHardwareRounding) {
          min_x = min_magnitude(bits, min_x);
        }
        const __m512 v = widen(bits);
        return _mm512_mul_ps(v, v);
      });
    }
    const float rstd = rstd_of<bf16_t>(sum_squares, n, args.eps);
    const bool plain = !(w_finite && rstd > 0.0f && rstd < INFINITY &&
                         flush_free(smallest(min_x), rstd, min_w));
    if (plain) {
      rmsnorm_cpu::scale_row<bf16_t>(x, w, out, n, rstd, args.unit_offset);
    } else if (args.unit_offset) {
      scale_row<true>(x, w, out, n, rstd);
    } else {
      scale_row<false>(x, w, out, n, rstd);
    }
  }
}

#ifdef RMSNORM_BF16_DOT
// Rows of x per call of pair_dots (its register budget).
constexpr int64_t kPairRows = 4;

// swiglu_mlp's bf16 products with VDPBF16PS: 32 bf16 weights times 32 bf16 values
// of x in one instruction, each pair's two products added into a float lane (in the
// instruction's own order and rounding: these sums may differ from the other
// copies' lane sums in the last float bit, hence in a bf16 result's last bit).
// Two accumulators per row keep two instructions in flight.
template <int M>
inline void pair_dots_of(const bf16_t* w, const bf16_t* x, int64_t ldx, int64_t n, float* out) {
  __m512 even[M];
  __m512 odd[M];
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
    even[m] = _mm512_setzero_ps();
    odd[m] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t i, __mmask32 lanes, __m512* acc) {
    const __m512bh wv = std::bit_cast<__m512bh>(_mm512_maskz_loadu_epi16(lanes, w + i));
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) {
      const __m512i xv = _mm512_maskz_loadu_epi16(lanes, x + m * ldx + i);
      acc[m] = _mm512_dpbf16_ps(acc[m], wv, std::bit_cast<__m512bh>(xv));
    }
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    step(i, ~__mmask32(0), even);
    step(i + 32, ~__mmask32(0), odd);
  }
  for (; i < n; i += 32) {
    step(i, n - i >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - i)) - 1u), even);
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
    out[m] = _mm512_reduce_add_ps(_mm512_add_ps(even[m], odd[m]));
  }
}

inline void pair_dots(const bf16_t* w, const bf16_t* x, int64_t ldx, int64_t rows, int64_t n,
                      float* out) {
  switch (rows) {
    case 1:
      return pair_dots_of<1>(w, x, ldx, n, out);
    case 2:
      return pair_dots_of<2>(w, x, ldx, n, out);
    case 3:
      return pair_dots_of<3>(w, x, ldx, n, out);
    default:
      return pair_dots_of<4>(w, x, ldx, n, out);
  }
}
#endif

}  // namespace bf16_rows
}  // namespace
}  // namespace rmsnorm_cpu
