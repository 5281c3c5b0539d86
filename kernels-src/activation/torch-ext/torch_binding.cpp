// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process.
#include "registration.h"
#include "torch_binding.h"

#include <torch/library.h>

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("silu_and_mul(Tensor! out, Tensor input) -> ()");
  ops.def("mul_and_silu(Tensor! out, Tensor input) -> ()");
  ops.def("gelu_and_mul(Tensor! out, Tensor input) -> ()");
  ops.def("gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()");
  ops.def("fatrelu_and_mul(Tensor! out, Tensor input, float threshold = 0.0) -> ()");
  ops.def("silu(Tensor! out, Tensor input) -> ()");
  ops.def("gelu(Tensor! out, Tensor input) -> ()");
  ops.def("gelu_tanh(Tensor! out, Tensor input) -> ()");
  ops.def("gelu_fast(Tensor! out, Tensor input) -> ()");
  ops.def("gelu_new(Tensor! out, Tensor input) -> ()");
  ops.def("gelu_quick(Tensor! out, Tensor input) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("silu_and_mul", c10::kCPU, &silu_and_mul);
  ops.impl("mul_and_silu", c10::kCPU, &mul_and_silu);
  ops.impl("gelu_and_mul", c10::kCPU, &gelu_and_mul);
  ops.impl("gelu_tanh_and_mul", c10::kCPU, &gelu_tanh_and_mul);
  ops.impl("fatrelu_and_mul", c10::kCPU, &fatrelu_and_mul);
  ops.impl("silu", c10::kCPU, &silu);
  ops.impl("gelu", c10::kCPU, &gelu);
  ops.impl("gelu_tanh", c10::kCPU, &gelu_tanh);
  ops.impl("gelu_fast", c10::kCPU, &gelu_fast);
  ops.impl("gelu_new", c10::kCPU, &gelu_new);
  ops.impl("gelu_quick", c10::kCPU, &gelu_quick);
  // Tensor-free, so they take no dispatch key.
  ops.def("cpu_capability() -> str", &cpu_capability);
  ops.def("set_cpu_capability(str capability) -> str", &set_cpu_capability);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
