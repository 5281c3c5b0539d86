// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process.
#include "registration.h"
#include "torch_binding.h"

#include <torch/library.h>

namespace {

void impl_all(torch::Library& ops, c10::DeviceType device) {
  ops.impl("causal_conv1d_fwd", device, &causal_conv1d_fwd);
  ops.impl("causal_conv1d_update", device, &causal_conv1d_update);
  ops.impl("ssd_scan", device, &ssd_scan);
  ops.impl("selective_state_update", device, &selective_state_update);
  ops.impl("selective_scan", device, &selective_scan);
}

}  // namespace

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("causal_conv1d_fwd(Tensor x, Tensor weight_t, Tensor? bias, bool silu) -> Tensor");
  ops.def(
      "causal_conv1d_update(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, "
      "bool silu) -> Tensor");
  ops.def(
      "ssd_scan(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
      "Tensor? initial_states, int chunk_size, bool return_final_states) -> (Tensor, Tensor)");
  ops.def(
      "selective_state_update(Tensor(a!) state, Tensor x, Tensor dt, Tensor A, Tensor B, "
      "Tensor C, Tensor? D, Tensor? z) -> Tensor");
  ops.def(
      "selective_scan(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, "
      "Tensor? z, bool return_last_state) -> (Tensor, Tensor)");
#if defined(CPU_KERNEL)
  impl_all(ops, c10::DeviceType::CPU);
  // Tensor-free, so they take no dispatch key.
  ops.def("cpu_capability() -> str", &cpu_capability);
  ops.def("set_cpu_capability(str capability) -> str", &set_cpu_capability);
#elif defined(CUDA_KERNEL)
  impl_all(ops, c10::DeviceType::CUDA);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
