// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), so several builds can be loaded in one process.
#include "registration.h"
#include "torch_binding.h"

#include <torch/library.h>

namespace {

// Every backend implements every op under the same C++ names (a variant holds
// one backend), so registering them differs only in the device.
void impl_all(torch::Library& ops, c10::DeviceType device) {
  ops.impl("silu_and_mul", device, &silu_and_mul);
  ops.impl("mul_and_silu", device, &mul_and_silu);
  ops.impl("gelu_and_mul", device, &gelu_and_mul);
  ops.impl("gelu_tanh_and_mul", device, &gelu_tanh_and_mul);
  ops.impl("fatrelu_and_mul", device, &fatrelu_and_mul);
  ops.impl("silu", device, &silu);
  ops.impl("gelu", device, &gelu);
  ops.impl("gelu_tanh", device, &gelu_tanh);
  ops.impl("gelu_fast", device, &gelu_fast);
  ops.impl("gelu_new", device, &gelu_new);
  ops.impl("gelu_quick", device, &gelu_quick);
}

}  // namespace

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
  impl_all(ops, c10::DeviceType::CPU);
  // Tensor-free, so they take no dispatch key.
  ops.def("cpu_capability() -> str", &cpu_capability);
  ops.def("set_cpu_capability(str capability) -> str", &set_cpu_capability);
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  // ROCm builds of torch expose AMD GPUs as CUDA devices.
  impl_all(ops, c10::DeviceType::CUDA);
#elif defined(METAL_KERNEL)
  impl_all(ops, c10::DeviceType::MPS);
#elif defined(XPU_KERNEL)
  impl_all(ops, c10::DeviceType::XPU);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
