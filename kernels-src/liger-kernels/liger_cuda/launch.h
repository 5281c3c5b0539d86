// The boundary between the op layer (rms_norm_cuda.cpp: torch's stable ABI,
// host compiler) and the device code (rms_norm_kernels.cu: nvcc or hipcc, once
// per GPU architecture). Only plain data crosses it, so the .cu file includes
// no torch header and the op layer no CUDA header.
#pragma once

#include <cstdint>

namespace liger_cuda {

enum class DType : int { Float, Double, BFloat16, Half };

// Per row of `hidden` contiguous elements: y = w * round(x * rstd),
// rstd = 1/sqrt(mean(x^2) + eps) in float32 (float64 for float64), rounded as
// Transformers' LlamaRMSNorm rounds 16-bit types.
struct RmsNormLaunch {
  const void* x;
  const void* weight;
  void* out;
  int64_t rows;
  int64_t hidden;
  double eps;
  DType dtype;
  void* stream;  // cudaStream_t / hipStream_t: torch's current stream on x's device
};

// Enqueues the kernel on `args.stream`; null on success, else the runtime's error text.
const char* launch_rms_norm(const RmsNormLaunch& args);

}  // namespace liger_cuda
