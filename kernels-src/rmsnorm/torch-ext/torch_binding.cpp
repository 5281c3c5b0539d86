// Declares the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process. The
// CPU implementations are registered in rmsnorm_cpu/rmsnorm_cpu.cpp, the
// CUDA/ROCm ones in rmsnorm_cuda/rmsnorm_cuda.cpp (each variant compiles one).
#include "registration.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  // rms_norm(x) * weight over the last dimension; unit_offset: * (1 + weight) (Gemma).
  ops.def("rms_norm(Tensor x, Tensor weight, float eps, bool unit_offset=False) -> Tensor");
  ops.def(
      "rms_norm_out(Tensor(a!) out, Tensor x, Tensor weight, float eps, "
      "bool unit_offset=False) -> ()");
  ops.def(
      "rms_norm_backward(Tensor grad_out, Tensor x, Tensor weight, float eps, "
      "bool unit_offset=False) -> (Tensor, Tensor)");
  // residual <- x + residual (in place); returns rms_norm(residual) * weight.
  ops.def(
      "fused_add_rms_norm(Tensor x, Tensor(a!) residual, Tensor weight, float eps) -> Tensor");
  ops.def(
      "fused_add_rms_norm_out(Tensor(a!) out, Tensor x, Tensor(b!) residual, Tensor weight, "
      "float eps) -> ()");
  // The functional form (for autograd): (rms_norm(x + residual) * weight, x + residual).
  ops.def("add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps) -> (Tensor, Tensor)");
  // silu(gate) * up, the SwiGLU activation of the fused RMSNormMLP.
  ops.def("silu_mul(Tensor gate, Tensor up) -> Tensor");
  ops.def("silu_mul_out(Tensor(a!) out, Tensor gate, Tensor up) -> ()");
  ops.def("cpu_capability() -> str");
  ops.def("set_cpu_capability(str capability) -> str");
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
