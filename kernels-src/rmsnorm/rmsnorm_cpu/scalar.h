// Scalar building blocks written so that GCC vectorizes the loops that use
// them: bf16/fp16 conversions as branch-free bit arithmetic (no library call,
// no table) and a polynomial exp. Everything is in an anonymous namespace:
// each per-capability copy of the loops gets its own instance.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace rmsnorm_cpu {
namespace {

// Storage types for the two 16-bit float formats; only their bits matter here.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

// The type a dtype is computed in: float for every format but double.
template <typename T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};
template <typename T>
using acc_t = typename Acc<T>::type;

inline float widen(float v) {
  return v;
}
inline double widen(double v) {
  return v;
}
inline float widen(bf16_t v) {
  return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
}
// Half -> float, exact for every input (normals, subnormals, inf, NaN): the
// normal path re-biases the exponent by a multiply, the subnormal path builds
// 0.5 + m * 2^-24 and subtracts 0.5.
inline float widen(f16_t v) {
  const uint32_t w = static_cast<uint32_t>(v.bits) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normal = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float subnormal = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? std::bit_cast<uint32_t>(subnormal)
                                                : std::bit_cast<uint32_t>(normal);
  return std::bit_cast<float>(sign | magnitude);
}

// 1 / sqrt(mean of squares + eps), the scale of every RMSNorm row.
template <typename T>
inline acc_t<T> rstd_of(acc_t<T> sum_squares, int64_t hidden, double eps) {
  using A = acc_t<T>;
  return A(1) / std::sqrt(sum_squares / A(hidden) + A(eps));
}

template <typename T>
inline T narrow(acc_t<T> v);

template <>
inline float narrow<float>(float v) {
  return v;
}
template <>
inline double narrow<double>(double v) {
  return v;
}
// Float -> bf16, round to nearest even; NaN stays a (quiet) NaN.
template <>
inline bf16_t narrow<bf16_t>(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return {static_cast<uint16_t>(v != v ? 0x7FC0u : rounded)};
}
// Float -> half, round to nearest even, overflow to inf, NaN to NaN: adding a
// power of two sized to the value's exponent makes the float adder do the
// rounding at half's precision (needs exact IEEE float adds: no fast-math).
template <>
inline f16_t narrow<f16_t>(float v) {
  float base = (std::fabs(v) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = std::bit_cast<uint32_t>(v);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
  return {static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign))};
}

// exp for float, within ~2 ulp, vectorizable: 2^n * p(r) with n = round(x /
// ln2) by the 1.5 * 2^23 trick, r = x - n ln2 in two parts, p a degree-6
// Taylor polynomial (|r| <= ln2/2 makes its error ~1e-7). The argument is
// clamped to [-87, 88] so 2^n stays a normal float; NaN passes through.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  const float shifted = x * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>(static_cast<uint32_t>(ni + 127) << 23);
}
inline double exp_approx(double x) {
  return std::exp(x);
}

// silu(x) = x / (1 + exp(-x)): one exp and no cancellation for negative x.
template <typename A>
inline A silu(A x) {
  return x / (A(1) + exp_approx(-x));
}

}  // namespace
}  // namespace rmsnorm_cpu
