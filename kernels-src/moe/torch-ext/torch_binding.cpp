// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process.
#include "registration.h"
#include "torch_binding.h"

#include <torch/library.h>

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def(
      "moe_experts(Tensor hidden, Tensor top_k_index, Tensor top_k_weights, "
      "Tensor gate_up, Tensor down, int activation, Tensor? gate_up_bias=None, "
      "Tensor? down_bias=None, bool transposed=False, bool interleaved=False, "
      "float alpha=1.702, float limit=7.0, int gemm_rows=-1) -> Tensor");
  ops.def(
      "moe_router(Tensor hidden, Tensor weight, int top_k, int scoring, "
      "Tensor? bias, float softcap) -> (Tensor, Tensor, Tensor)");
#if defined(CPU_KERNEL)
  ops.impl("moe_experts", c10::DeviceType::CPU, &moe_experts);
  ops.impl("moe_router", c10::DeviceType::CPU, &moe_router);
#elif defined(CUDA_KERNEL)
  ops.impl("moe_experts", c10::DeviceType::CUDA, &moe_experts);
  ops.impl("moe_router", c10::DeviceType::CUDA, &moe_router);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
