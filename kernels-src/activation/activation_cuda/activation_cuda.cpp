// The CUDA/ROCm ops: check arguments, bring the data into the layout the
// kernels expect, and hand plain pointers to the launchers in
// activation_kernels.cu. Compiled by the host compiler, so this is the only
// file of the part that parses ATen. ROCm builds of torch report their GPUs as
// CUDA devices, so the same checks serve both.
#include "../activation_common/op_checks.h"
#include "../torch-ext/torch_binding.h"
#include "launch.h"

#include <c10/core/DeviceGuard.h>

namespace activation_cuda {
namespace {

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::kHalf: return DType::Half;
    case c10::kBFloat16: return DType::BFloat16;
    default: return DType::Float;  // check_common allowed nothing else
  }
}

void check_common(const char* op, const at::Tensor& out, const at::Tensor& input) {
  activation_common::check_tensors(op, out, input, c10::DeviceType::CUDA, "CUDA",
                                   {c10::kFloat, c10::kBFloat16, c10::kHalf},
                                   "float32, bfloat16 or float16");
}

void run_gated(const char* op, at::Tensor& out, const at::Tensor& input, Activation act,
               bool act_on_second, double threshold = 0.0) {
  check_common(op, out, input);
  const int64_t d = activation_common::check_gated_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  // Kernels and copies below run on the tensors' device and its current stream.
  const c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  activation_common::into(out, [&](at::Tensor& dst) {
    launch_gated(GatedLaunch{dst.data_ptr(), x.const_data_ptr(), x.numel() / (2 * d), d, act,
                             act_on_second, static_cast<float>(threshold), dtype_of(x),
                             x.get_device()});
  });
}

void run_unary(const char* op, at::Tensor& out, const at::Tensor& input, Activation act) {
  check_common(op, out, input);
  activation_common::check_unary_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  const c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  activation_common::into(out, [&](at::Tensor& dst) {
    launch_unary(UnaryLaunch{dst.data_ptr(), x.const_data_ptr(), x.numel(), act, dtype_of(x),
                             x.get_device()});
  });
}

}  // namespace
}  // namespace activation_cuda

using activation_cuda::Activation;

void silu_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_gated("silu_and_mul", out, input, Activation::Silu, false);
}

void mul_and_silu(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_gated("mul_and_silu", out, input, Activation::Silu, true);
}

void gelu_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_gated("gelu_and_mul", out, input, Activation::Gelu, false);
}

void gelu_tanh_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_gated("gelu_tanh_and_mul", out, input, Activation::GeluTanh, false);
}

void fatrelu_and_mul(at::Tensor& out, const at::Tensor& input, double threshold) {
  activation_cuda::run_gated("fatrelu_and_mul", out, input, Activation::FatRelu, false,
                             threshold);
}

void silu(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_unary("silu", out, input, Activation::Silu);
}

void gelu(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_unary("gelu", out, input, Activation::Gelu);
}

void gelu_tanh(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_unary("gelu_tanh", out, input, Activation::GeluTanh);
}

// gelu_fast and gelu_new are the tanh approximation written two other ways.
void gelu_fast(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_unary("gelu_fast", out, input, Activation::GeluTanh);
}

void gelu_new(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_unary("gelu_new", out, input, Activation::GeluTanh);
}

void gelu_quick(at::Tensor& out, const at::Tensor& input) {
  activation_cuda::run_unary("gelu_quick", out, input, Activation::GeluQuick);
}
