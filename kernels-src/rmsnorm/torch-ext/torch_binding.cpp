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
  // The same into given tensors: out <- rms_norm(x + residual), sum <- x + residual.
  ops.def(
      "add_rms_norm_out(Tensor(a!) out, Tensor(b!) sum, Tensor x, Tensor residual, Tensor weight, "
      "float eps) -> ()");
  // silu(gate) * up, the SwiGLU activation of the fused RMSNormMLP.
  ops.def("silu_mul(Tensor gate, Tensor up) -> Tensor");
  ops.def("silu_mul_out(Tensor(a!) out, Tensor gate, Tensor up) -> ()");
  // down(silu(x w_gate^T) * (x w_up^T)) (+ residual): a SwiGLU MLP for a few rows
  // (decode), each weight streamed once. CPU only.
  ops.def(
      "swiglu_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, "
      "Tensor? residual=None) -> Tensor");
  // x weight^T (+ bias) (+ residual), summed in float32 for bfloat16/float16 and rounded
  // once, each weight row streamed once for all rows of x: a decode step's projection.
  // CPU only.
  ops.def("linear(Tensor x, Tensor weight, Tensor? bias=None, Tensor? residual=None) -> Tensor");
  // The gated norm of gated delta nets and Mamba-2: rms_norm(x) * weight * act(gate)
  // (norm_before_gate), or rms_norm(x * act(gate)) * weight, per group of group_size
  // columns (0: the row), act silu or sigmoid, in float rounded once. CPU only.
  ops.def(
      "rms_norm_gated(Tensor x, Tensor? gate, Tensor weight, float eps, int group_size=0, "
      "bool norm_before_gate=True, str activation='silu') -> Tensor");
  // Its gradients (grad_x, grad_gate (empty without a gate), grad_weight), in float
  // rounded once. CPU only.
  ops.def(
      "rms_norm_gated_backward(Tensor grad_out, Tensor x, Tensor? gate, Tensor weight, "
      "float eps, int group_size, bool norm_before_gate, str activation) "
      "-> (Tensor, Tensor, Tensor)");
  ops.def("cpu_capability() -> str");
  ops.def("set_cpu_capability(str capability) -> str");
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
