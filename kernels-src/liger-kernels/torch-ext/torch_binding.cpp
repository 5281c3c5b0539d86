// Declares the ops under this build's own namespace (TORCH_EXTENSION_NAME, set
// by the builder), so several builds load side by side in one process. The CPU
// implementation is registered in liger_cpu/rms_norm_cpu.cpp, the CUDA/ROCm one
// in liger_cuda/rms_norm_cuda.cpp (each variant compiles one of them).
#include "registration.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  // Llama's RMSNorm over the last dimension, rounded as LlamaRMSNorm rounds:
  // weight * (x * rsqrt(mean(x^2) + eps)).to(x.dtype), the norm in float32.
  ops.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
