// Device-side building blocks shared by the kernels of this directory, and
// everything that differs between CUDA (nvcc) and ROCm (hipcc): runtime and
// half/bfloat16 headers, the bfloat16 type, the warp shuffle. No torch header
// is included: the op layer passes the stream and plain pointers, so nvcc's
// per-architecture passes stay short and the library binds only to torch's
// stable C shim.
//
// Warp size is read at run time (`warpSize`: 32 on NVIDIA, 32 or 64 on AMD),
// so the reductions are correct on both without a compile-time assumption.
#pragma once

#if defined(__HIPCC__) || defined(USE_ROCM)

#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

namespace layernorm_cuda {
using gpu_stream_t = hipStream_t;
using bfloat16_t = __hip_bfloat16;
using half_t = __half;

template <typename A>
__device__ __forceinline__ A shfl_xor(A v, int offset) { return __shfl_xor(v, offset); }

inline const char* last_launch_error() {
  const hipError_t err = hipGetLastError();
  return err == hipSuccess ? nullptr : hipGetErrorString(err);
}

inline int multiprocessor_count(int device) {
  int count = 0;
  if (hipDeviceGetAttribute(&count, hipDeviceAttributeMultiprocessorCount, device) !=
      hipSuccess) {
    return 1;
  }
  return count;
}

__device__ __forceinline__ bfloat16_t float_to_bfloat16(float v) { return __float2bfloat16(v); }
}  // namespace layernorm_cuda

#else

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace layernorm_cuda {
using gpu_stream_t = cudaStream_t;
using bfloat16_t = __nv_bfloat16;
using half_t = __half;

template <typename A>
__device__ __forceinline__ A shfl_xor(A v, int offset) {
  return __shfl_xor_sync(0xffffffffu, v, offset);
}

inline const char* last_launch_error() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

inline int multiprocessor_count(int device) {
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 1;
  }
  return count;
}

__device__ __forceinline__ bfloat16_t float_to_bfloat16(float v) {
  return __float2bfloat16_rn(v);
}
}  // namespace layernorm_cuda

#endif

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace layernorm_cuda {

// Threads per block are a multiple of 64 (whole warps on NVIDIA and AMD) and at
// most 1024, so a block has at most 32 warps: the size of the reduction scratch.
constexpr int kMaxThreads = 1024;
constexpr int kThreadMultiple = 64;
constexpr int kMaxWarps = kMaxThreads / 32;
constexpr int kAccessBytes = 16;

// float accumulation for every dtype but float64, which keeps double.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Elements per 128-bit access.
template <typename T>
constexpr int kPack = kAccessBytes / static_cast<int>(sizeof(T));

// V consecutive elements moved as one access (V == 1: a plain element).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(half_t v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(bfloat16_t v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) {
  if constexpr (std::is_same_v<T, half_t>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return float_to_bfloat16(v);
  } else {
    return v;
  }
}

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    v += shfl_xor(v, offset);
  }
  return v;
}

// The sum of `v` over the block, returned to every thread. Warp sums are
// added in warp order, so the result is the same on every run. `scratch`
// holds kMaxWarps values; the leading barrier lets calls reuse it.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* scratch) {
  v = warp_sum(v);
  const int lane = static_cast<int>(threadIdx.x) % warpSize;
  const int warp = static_cast<int>(threadIdx.x) / warpSize;
  __syncthreads();
  if (lane == 0) {
    scratch[warp] = v;
  }
  __syncthreads();
  const int warps = (static_cast<int>(blockDim.x) + warpSize - 1) / warpSize;
  A total = 0;
  for (int w = 0; w < warps; ++w) {
    total += scratch[w];
  }
  return total;
}

inline bool aligned(const void* p) {
  return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % kAccessBytes == 0;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Threads for a row of `items` accesses: whole multiples of 64, 64..1024.
inline int row_threads(int64_t items) {
  const int64_t rounded = ceil_div(items < 1 ? 1 : items, kThreadMultiple) * kThreadMultiple;
  return static_cast<int>(rounded < kMaxThreads ? rounded : kMaxThreads);
}

// Cached per device: the attribute query is a driver call, the ops are hot.
inline int cached_multiprocessor_count(int device) {
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

}  // namespace layernorm_cuda
