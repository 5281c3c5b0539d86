// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process.
#include "registration.h"
#include "torch_binding.h"

#include <torch/library.h>

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def(
      "attention(Tensor q, Tensor k, Tensor v, Tensor? attn_mask, float scale, bool causal, "
      "int window_left, int window_right, float softcap) -> Tensor");
  ops.def(
      "attention_out(Tensor(a!) out, Tensor q, Tensor k, Tensor v, Tensor? attn_mask, "
      "float scale, bool causal, int window_left, int window_right, float softcap) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("attention", c10::kCPU, &attention_cpu);
  ops.impl("attention_out", c10::kCPU, &attention_out_cpu);
  // Tensor-free, so they take no dispatch key.
  ops.def("cpu_capability() -> str", &cpu_capability);
  ops.def("set_cpu_capability(str capability) -> str", &set_cpu_capability);
  ops.def("set_attention_dispatch(str mode) -> str", &set_attention_dispatch);
  ops.def("attention_dispatch_decisions() -> str[]", &attention_dispatch_decisions);
#endif
#if defined(CUDA_KERNEL)
  ops.impl("attention", c10::kCUDA, &attention_cuda);
  ops.impl("attention_out", c10::kCUDA, &attention_out_cuda);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
