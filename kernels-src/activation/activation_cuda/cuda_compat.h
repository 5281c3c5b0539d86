// What differs between CUDA (nvcc) and ROCm (hipcc) for these kernels: the
// runtime and half/bfloat16 headers, the bfloat16 type and its conversions,
// and where torch's current stream comes from. The kernels use no warp
// shuffles or warp-size assumptions (block sizes are multiples of 64, a whole
// number of warps on both), so this is all the difference there is.
//
// The file compiles as is under hipcc, and also after torch's hipify pass
// rewrote it (hipify leaves the HIP branch alone and the CUDA branch is not
// compiled there).
#pragma once

#if defined(__HIPCC__) || defined(USE_ROCM)

#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#include <c10/hip/HIPException.h>
#include <c10/hip/HIPStream.h>

namespace activation_cuda {

using gpu_stream_t = hipStream_t;
using half_t = __half;
using bfloat16_t = __hip_bfloat16;

inline gpu_stream_t current_stream(int device) {
  return c10::hip::getCurrentHIPStream(static_cast<c10::DeviceIndex>(device)).stream();
}

inline int multiprocessor_count(int device) {
  int count = 0;
  C10_HIP_CHECK(hipDeviceGetAttribute(&count, hipDeviceAttributeMultiprocessorCount, device));
  return count;
}

__device__ __forceinline__ float bfloat16_to_float(bfloat16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ bfloat16_t float_to_bfloat16(float v) { return __float2bfloat16(v); }

}  // namespace activation_cuda

#define ACTIVATION_KERNEL_LAUNCH_CHECK() C10_HIP_KERNEL_LAUNCH_CHECK()

#else

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

namespace activation_cuda {

using gpu_stream_t = cudaStream_t;
using half_t = __half;
using bfloat16_t = __nv_bfloat16;

inline gpu_stream_t current_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

inline int multiprocessor_count(int device) {
  int count = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

__device__ __forceinline__ float bfloat16_to_float(bfloat16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ bfloat16_t float_to_bfloat16(float v) { return __float2bfloat16_rn(v); }

}  // namespace activation_cuda

#define ACTIVATION_KERNEL_LAUNCH_CHECK() C10_CUDA_KERNEL_LAUNCH_CHECK()

#endif
