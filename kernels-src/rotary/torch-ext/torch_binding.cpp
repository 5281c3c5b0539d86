// Registers the ops under this build's unique namespace (TORCH_EXTENSION_NAME,
// set by the builder), through torch's stable ABI.
#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("apply_rotary(Tensor(a!) q, Tensor(b!) k, Tensor cos, Tensor sin) -> ()");
  ops.def(
      "apply_rotary_out(Tensor(a!) q_out, Tensor(b!) k_out, Tensor q, Tensor k, Tensor cos, "
      "Tensor sin, bool conj=False) -> ()");
  ops.def("rotary(Tensor q, Tensor k, Tensor cos, Tensor sin, bool conj=False) -> (Tensor, Tensor)");
#if defined(CPU_KERNEL)
  // The CPU loop selection exists only in CPU builds (a variant holds one backend).
  ops.def("cpu_capability() -> str");
  ops.def("set_cpu_capability(str capability) -> str");
#endif
}

#if defined(CPU_KERNEL)
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("apply_rotary", TORCH_BOX(&apply_rotary));
  ops.impl("apply_rotary_out", TORCH_BOX(&apply_rotary_out));
  ops.impl("rotary", TORCH_BOX(&rotary));
}

// Tensor-free ops take no backend key.
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, ops) {
  ops.impl("cpu_capability", TORCH_BOX(&cpu_capability));
  ops.impl("set_cpu_capability", TORCH_BOX(&set_cpu_capability));
}
#endif

// ROCm builds of torch expose AMD GPUs as CUDA devices, so both register CUDA.
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("apply_rotary", TORCH_BOX(&apply_rotary));
  ops.impl("apply_rotary_out", TORCH_BOX(&apply_rotary_out));
  ops.impl("rotary", TORCH_BOX(&rotary));
}
#endif

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
