// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process.
#include "registration.h"
#include "torch_binding.h"

#include <torch/library.h>

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def(
      "chunk_gated_delta_rule_fwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, "
      "float scale, Tensor? initial_state, bool use_qk_l2norm, int chunk_size) -> (Tensor, Tensor)");
  ops.def(
      "recurrent_gated_delta_rule_fwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, "
      "float scale, Tensor? initial_state, bool use_qk_l2norm) -> (Tensor, Tensor)");
#if defined(CPU_KERNEL)
  // CPU only: the layer runs PyTorch's conv1d on other devices.
  ops.def(
      "causal_conv1d_silu(Tensor x, Tensor weight, Tensor? bias, Tensor(a!)? state, int keep) "
      "-> Tensor");
  ops.impl("causal_conv1d_silu", c10::DeviceType::CPU, &causal_conv1d_silu);
  ops.impl("chunk_gated_delta_rule_fwd", c10::DeviceType::CPU, &chunk_gated_delta_rule_fwd);
  ops.impl("recurrent_gated_delta_rule_fwd", c10::DeviceType::CPU,
           &recurrent_gated_delta_rule_fwd);
  // Tensor-free, so they take no dispatch key.
  ops.def("cpu_capability() -> str", &cpu_capability);
  ops.def("set_cpu_capability(str capability) -> str", &set_cpu_capability);
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("chunk_gated_delta_rule_fwd", c10::DeviceType::CUDA, &chunk_gated_delta_rule_fwd);
  ops.impl("recurrent_gated_delta_rule_fwd", c10::DeviceType::CUDA,
           &recurrent_gated_delta_rule_fwd);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
