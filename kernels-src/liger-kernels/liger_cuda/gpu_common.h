// What differs between CUDA (nvcc) and ROCm (hipcc) for the kernel of this
// directory: the runtime and 16-bit type headers, the 16-bit types, the launch
// error query. No torch header: the op layer passes plain pointers and the
// stream, so the device code binds to nothing of torch.
#pragma once

#if defined(__HIPCC__) || defined(USE_ROCM)

#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

namespace liger_cuda {
using gpu_stream_t = hipStream_t;
using bfloat16_t = __hip_bfloat16;
using half_t = __half;

inline const char* last_launch_error() {
  const hipError_t err = hipGetLastError();
  return err == hipSuccess ? nullptr : hipGetErrorString(err);
}
}  // namespace liger_cuda

#else

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace liger_cuda {
using gpu_stream_t = cudaStream_t;
using bfloat16_t = __nv_bfloat16;
using half_t = __half;

inline const char* last_launch_error() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}
}  // namespace liger_cuda

#endif
