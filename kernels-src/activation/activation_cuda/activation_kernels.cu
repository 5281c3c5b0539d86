// The GPU kernels (CUDA, and ROCm through hipcc): memory-bound elementwise
// loops, so the work is all in moving bytes well.
//
// * 128-bit accesses: each thread loads and stores 16 bytes at a time (4
//   floats or 8 halves/bfloat16s) whenever the pointers and the row width
//   allow it, and falls back to element accesses (still coalesced) otherwise.
// * Gated ops: one block per row (grid-stride over rows beyond the grid), the
//   block's threads striding over the row, so both halves are read in
//   contiguous sweeps and `mul_and_silu` is the same kernel with the halves
//   swapped.
// * Elementwise ops: a grid-stride loop over the flat range, with a grid sized
//   to fill every multiprocessor once rather than one thread per element.
// * Math in float for every dtype, rounded once on store; sigmoid forms are
//   x / (1 + exp(-z)) with the precise expf (one exp, no cancellation for
//   negative x), the exact gelu uses erfcf (accurate in the negative tail).
//
// Instantiations are kept few on purpose (nvcc repeats them per architecture):
// one kernel per (activation, dtype), the vector/scalar choice is a runtime
// flag. 4 gated + 4 elementwise activations x 3 dtypes = 24 kernels.
#include "cuda_compat.h"
#include "launch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

namespace activation_cuda {
namespace {

// ---- element conversions ---------------------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(half_t v) { return __half2float(v); }
__device__ __forceinline__ float to_float(bfloat16_t v) { return bfloat16_to_float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ half_t from_float<half_t>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ bfloat16_t from_float<bfloat16_t>(float v) {
  return float_to_bfloat16(v);
}

// ---- activations (float in, float out) -------------------------------------

// x * sigmoid(z) as x / (1 + exp(-z)); `neg_z` is -z. exp overflowing to inf
// gives the correct limit (a signed zero); NaN propagates.
__device__ __forceinline__ float x_times_sigmoid(float x, float neg_z) {
  return x / (1.0f + expf(neg_z));
}

struct SiluOp {
  __device__ __forceinline__ float operator()(float x) const { return x_times_sigmoid(x, -x); }
};

struct GeluOp {
  // 0.5 * x * (1 + erf(x / sqrt(2))) == 0.5 * x * erfc(-x / sqrt(2)).
  __device__ __forceinline__ float operator()(float x) const {
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
  }
};

struct GeluTanhOp {
  // 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3).
  __device__ __forceinline__ float operator()(float x) const {
    constexpr float kBeta = 0.7978845608028654f;
    constexpr float kKappa = 0.044715f;
    const float neg_two_u = x * fmaf(x * x, -2.0f * kBeta * kKappa, -2.0f * kBeta);
    return x_times_sigmoid(x, neg_two_u);
  }
};

struct GeluQuickOp {
  __device__ __forceinline__ float operator()(float x) const {
    return x_times_sigmoid(x, -1.702f * x);
  }
};

struct FatReluOp {
  float threshold;
  __device__ __forceinline__ float operator()(float x) const { return x > threshold ? x : 0.0f; }
};

// ---- kernels ---------------------------------------------------------------

constexpr int kAccessBytes = 16;
constexpr int kWarpMultiple = 64;  // a whole number of warps on NVIDIA (32) and AMD (64)
constexpr int kMaxGatedThreads = 1024;
constexpr int kUnaryThreads = 256;
constexpr int kUnaryBlocksPerSm = 8;  // 8 x 256 threads fill an SM (2048 resident threads)

template <typename T>
struct alignas(kAccessBytes) Pack {
  static constexpr int kSize = kAccessBytes / static_cast<int>(sizeof(T));
  T v[kSize];
};

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxGatedThreads)
    gated_kernel(T* __restrict__ out, const T* __restrict__ input, int64_t rows, int64_t d, Op op,
                 bool act_on_second, bool vectorized) {
  using P = Pack<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* first = input + row * 2 * d;
    const T* act_in = act_on_second ? first + d : first;
    const T* mul_in = act_on_second ? first : first + d;
    T* dst = out + row * d;
    if (vectorized) {
      const int64_t packs = d / P::kSize;
      for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
        const P a = reinterpret_cast<const P*>(act_in)[i];
        const P b = reinterpret_cast<const P*>(mul_in)[i];
        P r;
#pragma unroll
        for (int k = 0; k < P::kSize; ++k) {
          r.v[k] = from_float<T>(op(to_float(a.v[k])) * to_float(b.v[k]));
        }
        reinterpret_cast<P*>(dst)[i] = r;
      }
    } else {
      for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        dst[i] = from_float<T>(op(to_float(act_in[i])) * to_float(mul_in[i]));
      }
    }
  }
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kUnaryThreads)
    unary_kernel(T* __restrict__ out, const T* __restrict__ input, int64_t numel, Op op,
                 bool vectorized) {
  using P = Pack<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vectorized) {
    const int64_t packs = numel / P::kSize;
    for (int64_t i = first; i < packs; i += stride) {
      const P a = reinterpret_cast<const P*>(input)[i];
      P r;
#pragma unroll
      for (int k = 0; k < P::kSize; ++k) {
        r.v[k] = from_float<T>(op(to_float(a.v[k])));
      }
      reinterpret_cast<P*>(out)[i] = r;
    }
    done = packs * P::kSize;
  }
  for (int64_t i = done + first; i < numel; i += stride) {  // the tail, or everything
    out[i] = from_float<T>(op(to_float(input[i])));
  }
}

// ---- launch ----------------------------------------------------------------

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kAccessBytes == 0;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cached per device: the attribute query is a driver call, the ops are hot.
int cached_multiprocessor_count(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> counts[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) {
    return multiprocessor_count(device);
  }
  int count = counts[device].load(std::memory_order_relaxed);
  if (count == 0) {
    count = multiprocessor_count(device);
    counts[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

template <typename T, typename Op>
void gated_typed(const GatedLaunch& a, Op op) {
  constexpr int kPack = Pack<T>::kSize;
  // Every row start (and the second half) stays 16-byte aligned only when d is
  // a multiple of the pack; otherwise use element accesses for the whole op.
  const bool vectorized = a.d % kPack == 0 && aligned(a.input) && aligned(a.out);
  const int64_t per_row = vectorized ? a.d / kPack : a.d;
  const int threads = static_cast<int>(
      std::min<int64_t>(kMaxGatedThreads, ceil_div(per_row, kWarpMultiple) * kWarpMultiple));
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>(a.rows, std::numeric_limits<int32_t>::max()));
  gated_kernel<T, Op><<<blocks, threads, 0, current_stream(a.device)>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.input), a.rows, a.d, op, a.act_on_second,
      vectorized);
  ACTIVATION_KERNEL_LAUNCH_CHECK();
}

template <typename T, typename Op>
void unary_typed(const UnaryLaunch& a, Op op) {
  const bool vectorized = aligned(a.input) && aligned(a.out);
  const int64_t work = vectorized ? ceil_div(a.numel, Pack<T>::kSize) : a.numel;
  const int64_t fill = static_cast<int64_t>(cached_multiprocessor_count(a.device)) *
                       kUnaryBlocksPerSm;
  const unsigned blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min(ceil_div(work, kUnaryThreads), fill)));
  unary_kernel<T, Op><<<blocks, kUnaryThreads, 0, current_stream(a.device)>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.input), a.numel, op, vectorized);
  ACTIVATION_KERNEL_LAUNCH_CHECK();
}

template <typename Op>
void gated_dtype(const GatedLaunch& a, Op op) {
  switch (a.dtype) {
    case DType::Float: return gated_typed<float>(a, op);
    case DType::Half: return gated_typed<half_t>(a, op);
    case DType::BFloat16: return gated_typed<bfloat16_t>(a, op);
  }
}

template <typename Op>
void unary_dtype(const UnaryLaunch& a, Op op) {
  switch (a.dtype) {
    case DType::Float: return unary_typed<float>(a, op);
    case DType::Half: return unary_typed<half_t>(a, op);
    case DType::BFloat16: return unary_typed<bfloat16_t>(a, op);
  }
}

}  // namespace

void launch_gated(const GatedLaunch& args) {
  switch (args.act) {
    case Activation::Silu: return gated_dtype(args, SiluOp{});
    case Activation::Gelu: return gated_dtype(args, GeluOp{});
    case Activation::GeluTanh: return gated_dtype(args, GeluTanhOp{});
    case Activation::FatRelu: return gated_dtype(args, FatReluOp{args.threshold});
    case Activation::GeluQuick: break;  // no gated op uses it
  }
  TORCH_CHECK(false, "activation: no gated GPU kernel for activation ",
              static_cast<int>(args.act));
}

void launch_unary(const UnaryLaunch& args) {
  switch (args.act) {
    case Activation::Silu: return unary_dtype(args, SiluOp{});
    case Activation::Gelu: return unary_dtype(args, GeluOp{});
    case Activation::GeluTanh: return unary_dtype(args, GeluTanhOp{});
    case Activation::GeluQuick: return unary_dtype(args, GeluQuickOp{});
    case Activation::FatRelu: break;  // gated only
  }
  TORCH_CHECK(false, "activation: no elementwise GPU kernel for activation ",
              static_cast<int>(args.act));
}

}  // namespace activation_cuda
