// The CUDA/ROCm ops: check arguments, bring tensors into the contiguous layout
// the kernels expect, allocate, and enqueue the kernels on torch's current
// stream of the tensors' device. Only torch's stable ABI is used (the stream
// comes through the stable C shim), so one build loads on every CUDA torch
// from 2.13 on; the device code is behind launch.h.
#include "launch.h"
#include "registration.h"

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace layernorm_cuda {
namespace {

using Guard = torch::stable::accelerator::DeviceGuard;

std::string shape_of(const Tensor& t) {
  std::ostringstream text;
  text << "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    text << (d ? ", " : "") << t.size(d);
  }
  text << "]";
  return text.str();
}

DType dtype_of(const char* op, const Tensor& t) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return DType::Float;
    case ScalarType::Double:
      return DType::Double;
    case ScalarType::BFloat16:
      return DType::BFloat16;
    case ScalarType::Half:
      return DType::Half;
    default:
      STD_TORCH_CHECK(false, op, ": dtype must be float32, float64, bfloat16 or float16, got ",
                      torch::headeronly::toString(t.scalar_type()));
  }
  return DType::Float;
}

// `t` must be a GPU tensor on x's device.
void check_device(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  STD_TORCH_CHECK(t.is_cuda(), op, ": ", what, " must be a CUDA tensor (x is on cuda:",
                  x.get_device_index(), ")");
  STD_TORCH_CHECK(t.get_device_index() == x.get_device_index(), op, ": ", what,
                  " is on cuda:", t.get_device_index(), " but x is on cuda:",
                  x.get_device_index());
}

// `what` must have the shape, dtype and device of `x`.
void check_like(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  check_device(op, what, t, x);
  STD_TORCH_CHECK(t.sizes().vec() == x.sizes().vec(), op, ": ", what, " must have shape ",
                  shape_of(x), ", got ", shape_of(t));
  STD_TORCH_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", what, " dtype (",
                  torch::headeronly::toString(t.scalar_type()), ") must match x (",
                  torch::headeronly::toString(x.scalar_type()), ")");
}

// x: [..., hidden]; weight and bias, when given: [hidden], x's dtype and device.
DType check_norm_args(const char* op, const Tensor& x, const std::optional<Tensor>& weight,
                      const std::optional<Tensor>& bias) {
  STD_TORCH_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor");
  const DType dtype = dtype_of(op, x);
  STD_TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a scalar");
  for (const auto& [name, t] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}}) {
    if (!t->has_value()) {
      continue;
    }
    const Tensor& p = t->value();
    check_device(op, name, p, x);
    STD_TORCH_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", name,
                    " must have shape [", x.size(-1), "] (the last dimension of x ",
                    shape_of(x), "), got ", shape_of(p));
    STD_TORCH_CHECK(p.scalar_type() == x.scalar_type(), op, ": ", name, " dtype (",
                    torch::headeronly::toString(p.scalar_type()), ") must match x dtype (",
                    torch::headeronly::toString(x.scalar_type()), "); cast one of them");
  }
  return dtype;
}

std::optional<Tensor> contiguous_or_none(const std::optional<Tensor>& t) {
  if (!t.has_value()) {
    return std::nullopt;
  }
  return torch::stable::contiguous(t.value());
}

const void* data_or_null(const std::optional<Tensor>& t) {
  return t.has_value() ? t->const_data_ptr() : nullptr;
}

// Torch's current stream on x's device (the caller holds a DeviceGuard).
Place place_of(const Tensor& x) {
  const int device = x.get_device_index();
  return {device, torch::stable::accelerator::getCurrentStream(device).nativeHandle()};
}

void check_launch(const char* op, const char* error) {
  STD_TORCH_CHECK(error == nullptr, op, ": GPU kernel launch failed: ", error);
}

int64_t rows_of(const Tensor& x) {
  const int64_t hidden = x.size(-1);
  return hidden == 0 ? 0 : x.numel() / hidden;
}

// Runs fn(dst) on `out` when contiguous, else on a contiguous staging tensor
// copied into `out` afterwards, so any `out` the caller owns is filled.
template <typename Fn>
void into(Tensor& out, const Tensor& like, const Fn& write_contiguous) {
  if (out.is_contiguous()) {
    write_contiguous(out);
    return;
  }
  Tensor staging = torch::stable::empty_like(like);
  write_contiguous(staging);
  torch::stable::copy_(out, staging);
}

void run_forward(const Tensor& x, const std::optional<Tensor>& weight,
                 const std::optional<Tensor>& bias, Tensor& out, double eps, DType dtype) {
  const int64_t rows = rows_of(x);
  if (rows == 0) {
    return;
  }
  ForwardLaunch args{x.const_data_ptr(), data_or_null(weight), data_or_null(bias),
                     out.mutable_data_ptr(), rows, x.size(-1), eps, dtype, place_of(x)};
  check_launch("layer_norm", launch_forward(args));
}

}  // namespace

void layer_norm_out(Tensor out, Tensor x, std::optional<Tensor> weight,
                    std::optional<Tensor> bias, double eps) {
  const DType dtype = check_norm_args("layer_norm", x, weight, bias);
  check_like("layer_norm", "out", out, x);
  const Guard guard(x.get_device_index());
  const Tensor xc = torch::stable::contiguous(x);
  const std::optional<Tensor> wc = contiguous_or_none(weight);
  const std::optional<Tensor> bc = contiguous_or_none(bias);
  into(out, xc, [&](Tensor& dst) { run_forward(xc, wc, bc, dst, eps, dtype); });
}

Tensor layer_norm(Tensor x, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
  check_norm_args("layer_norm", x, weight, bias);
  const Guard guard(x.get_device_index());
  Tensor out = torch::stable::empty_like(torch::stable::contiguous(x));
  layer_norm_out(out, x, weight, bias, eps);
  return out;
}

// (grad_x, grad_weight, grad_bias); the last two are computed whether or not
// weight/bias were given (the caller drops them). They are reduced through
// per-block partial sums in a fixed order (see layernorm_kernels.cu), so they
// are the same on every run.
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(Tensor grad_out, Tensor x,
                                                       std::optional<Tensor> weight,
                                                       std::optional<Tensor> bias, double eps) {
  const char* op = "layer_norm_backward";
  const DType dtype = check_norm_args(op, x, weight, bias);
  check_like(op, "grad_out", grad_out, x);
  const Guard guard(x.get_device_index());
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor gc = torch::stable::contiguous(grad_out);
  const std::optional<Tensor> wc = contiguous_or_none(weight);
  const int64_t hidden = xc.size(-1);
  const int64_t rows = rows_of(xc);
  Tensor grad_x = torch::stable::empty_like(xc);
  Tensor grad_w = torch::stable::new_empty(xc, {hidden});
  Tensor grad_b = torch::stable::new_empty(xc, {hidden});
  if (rows == 0) {  // sums over no rows
    torch::stable::zero_(grad_w);
    torch::stable::zero_(grad_b);
    return {grad_x, grad_w, grad_b};
  }
  const ScalarType acc = dtype == DType::Double ? ScalarType::Double : ScalarType::Float;
  Tensor partial = torch::stable::new_empty(
      xc, {backward_partial_rows(x.get_device_index(), rows), 2, hidden}, acc);
  BackwardLaunch args{gc.const_data_ptr(),
                      xc.const_data_ptr(),
                      data_or_null(wc),
                      grad_x.mutable_data_ptr(),
                      grad_w.mutable_data_ptr(),
                      grad_b.mutable_data_ptr(),
                      partial.mutable_data_ptr(),
                      rows,
                      hidden,
                      eps,
                      dtype,
                      place_of(xc)};
  check_launch(op, launch_backward(args));
  return {grad_x, grad_w, grad_b};
}

// A GPU build has no CPU loops; these exist so the API (and the tests' loop
// parametrization) behaves the same on every variant.
std::string cpu_capability() {
  return "NONE";
}

std::string set_cpu_capability(std::string capability) {
  STD_TORCH_CHECK(false, "set_cpu_capability: '", capability,
                  "' loops are not available: this is a GPU build of layernorm without CPU "
                  "loops; load the CPU variant to compare them");
  return "NONE";
}

}  // namespace layernorm_cuda

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("layer_norm", TORCH_BOX(&layernorm_cuda::layer_norm));
  ops.impl("layer_norm_out", TORCH_BOX(&layernorm_cuda::layer_norm_out));
  ops.impl("layer_norm_backward", TORCH_BOX(&layernorm_cuda::layer_norm_backward));
}

// Tensor-free ops have no device to dispatch on.
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, ops) {
  ops.impl("cpu_capability", TORCH_BOX(&layernorm_cuda::cpu_capability));
  ops.impl("set_cpu_capability", TORCH_BOX(&layernorm_cuda::set_cpu_capability));
}
