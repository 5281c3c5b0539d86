// Declares the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process. The
// CPU implementations are registered in layernorm_cpu/layernorm_cpu.cpp, the
// CUDA/ROCm ones in layernorm_cuda/layernorm_cuda.cpp (each variant compiles one).
#include "registration.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  // (x - mean) / sqrt(var + eps) * weight + bias over the last dimension.
  ops.def("layer_norm(Tensor x, Tensor? weight, Tensor? bias, float eps) -> Tensor");
  ops.def(
      "layer_norm_out(Tensor(a!) out, Tensor x, Tensor? weight, Tensor? bias, float eps) -> ()");
  ops.def(
      "layer_norm_backward(Tensor grad_out, Tensor x, Tensor? weight, Tensor? bias, float eps) "
      "-> (Tensor, Tensor, Tensor)");
  ops.def("cpu_capability() -> str");
  ops.def("set_cpu_capability(str capability) -> str");
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
