// Metal kernels: one thread per output element (grid [d, rows] for the gated
// ops, [numel] for the elementwise ones, dispatched with non-uniform
// threadgroups so no thread falls outside). Math in float for every dtype,
// rounded once on store; sigmoid forms are x / (1 + exp(-z)) with the precise
// exp. Metal's standard library has no erf, so the exact gelu uses a rational
// approximation of erfc (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).
#include <metal_stdlib>

#include "params.h"

using namespace metal;

#define ACT_SILU 0
#define ACT_GELU 1
#define ACT_GELU_TANH 2
#define ACT_GELU_QUICK 3
#define ACT_FATRELU 4

inline float x_times_sigmoid(float x, float neg_z) {
  return x / (1.0f + precise::exp(neg_z));
}

// erfc(z) for z >= 0.
inline float erfc_nonnegative(float z) {
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return poly * precise::exp(-z * z);
}

template <int A>
inline float activate(float x, float threshold);

template <>
inline float activate<ACT_SILU>(float x, float) {
  return x_times_sigmoid(x, -x);
}

// 0.5 * x * (1 + erf(z)), z = x / sqrt(2); for negative z, 1 + erf(z) is
// erfc(-z), computed directly so the negative tail keeps its precision.
template <>
inline float activate<ACT_GELU>(float x, float) {
  const float z = x * 0.70710678118654752f;
  const float one_plus_erf = z >= 0.0f ? 2.0f - erfc_nonnegative(z) : erfc_nonnegative(-z);
  return 0.5f * x * one_plus_erf;
}

// 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3).
template <>
inline float activate<ACT_GELU_TANH>(float x, float) {
  const float beta = 0.7978845608028654f;
  const float kappa = 0.044715f;
  return x_times_sigmoid(x, x * fma(x * x, -2.0f * beta * kappa, -2.0f * beta));
}

template <>
inline float activate<ACT_GELU_QUICK>(float x, float) {
  return x_times_sigmoid(x, -1.702f * x);
}

template <>
inline float activate<ACT_FATRELU>(float x, float threshold) {
  return x > threshold ? x : 0.0f;
}

template <typename T, int A>
kernel void gated(device const T* input [[buffer(0)]],
                  device T* out [[buffer(1)]],
                  constant GatedParams& params [[buffer(2)]],
                  uint2 gid [[thread_position_in_grid]]) {
  const ulong d = params.d;
  device const T* first = input + ulong(gid.y) * 2 * d;
  device const T* act_in = params.act_on_second ? first + d : first;
  device const T* mul_in = params.act_on_second ? first : first + d;
  const float value = activate<A>(float(act_in[gid.x]), params.threshold) * float(mul_in[gid.x]);
  out[ulong(gid.y) * d + gid.x] = T(value);
}

template <typename T, int A>
kernel void unary(device const T* input [[buffer(0)]],
                  device T* out [[buffer(1)]],
                  uint gid [[thread_position_in_grid]]) {
  out[gid] = T(activate<A>(float(input[gid]), 0.0f));
}

// Kernel names are <form>_<activation>_<dtype>; activation.mm builds the same.
#define INSTANTIATE_GATED(T, NAME, A)                                         \
  template [[host_name("gated_" NAME "_" #T)]] [[kernel]] void gated<T, A>( \
      device const T* input [[buffer(0)]], device T* out [[buffer(1)]],     \
      constant GatedParams& params [[buffer(2)]], uint2 gid [[thread_position_in_grid]]);

#define INSTANTIATE_UNARY(T, NAME, A)                                         \
  template [[host_name("unary_" NAME "_" #T)]] [[kernel]] void unary<T, A>( \
      device const T* input [[buffer(0)]], device T* out [[buffer(1)]],     \
      uint gid [[thread_position_in_grid]]);

#define INSTANTIATE_ALL(T)                             \
  INSTANTIATE_GATED(T, "silu", ACT_SILU)               \
  INSTANTIATE_GATED(T, "gelu", ACT_GELU)               \
  INSTANTIATE_GATED(T, "gelu_tanh", ACT_GELU_TANH)     \
  INSTANTIATE_GATED(T, "fatrelu", ACT_FATRELU)         \
  INSTANTIATE_UNARY(T, "silu", ACT_SILU)               \
  INSTANTIATE_UNARY(T, "gelu", ACT_GELU)               \
  INSTANTIATE_UNARY(T, "gelu_tanh", ACT_GELU_TANH)     \
  INSTANTIATE_UNARY(T, "gelu_quick", ACT_GELU_QUICK)

INSTANTIATE_ALL(float)
INSTANTIATE_ALL(half)
#if __METAL_VERSION__ >= 310
// bfloat arrived with Metal 3.1 (macOS 14); older systems get a clear error
// from activation.mm when the function is missing.
INSTANTIATE_ALL(bfloat)
#endif
