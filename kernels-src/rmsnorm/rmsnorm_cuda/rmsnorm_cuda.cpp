// The CUDA/ROCm ops: check arguments, bring tensors into the contiguous layout
// the kernels expect, allocate, and enqueue the kernels on torch's current
// stream of the tensors' device. Only torch's stable ABI is used (the stream
// comes through the stable C shim), so one build loads on every CUDA torch
// from 2.13 on; the device code is behind launch.h.
#include "launch.h"
#include "op_args.h"
#include "registration.h"

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <string>
#include <tuple>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace rmsnorm_cuda {
namespace {

using rmsnorm_common::rows_of;
using rmsnorm_common::shape_of;

DType dtype_of(const char* op, const Tensor& t) {
  return rmsnorm_common::dtype_of<DType>(op, t);
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
  rmsnorm_common::check_shape_dtype(op, what, t, x);
}

// x: [..., hidden], weight: [hidden], same dtype and device. Returns the dtype.
DType check_norm_args(const char* op, const Tensor& x, const Tensor& weight) {
  STD_TORCH_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor");
  check_device(op, "weight", weight, x);
  return rmsnorm_common::check_norm_shapes<DType>(op, x, weight);
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.strides().vec() == b.strides().vec();
}

// Torch's current stream on x's device (the caller holds a DeviceGuard).
Place place_of(const Tensor& x) {
  const int device = x.get_device_index();
  return {device, torch::stable::accelerator::getCurrentStream(device).nativeHandle()};
}

void check_launch(const char* op, const char* error) {
  STD_TORCH_CHECK(error == nullptr, op, ": GPU kernel launch failed: ", error);
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

void run_forward(const char* op, const Tensor& x, const Tensor* residual, const Tensor& weight,
                 Tensor& out, Tensor* sum, double eps, bool unit_offset, DType dtype) {
  const int64_t rows = rows_of(x);
  if (rows == 0) {
    return;
  }
  ForwardLaunch args{x.const_data_ptr(),
                     residual != nullptr ? residual->const_data_ptr() : nullptr,
                     weight.const_data_ptr(),
                     out.mutable_data_ptr(),
                     sum != nullptr ? sum->mutable_data_ptr() : nullptr,
                     rows,
                     x.size(-1),
                     eps,
                     unit_offset,
                     dtype,
                     place_of(x)};
  check_launch(op, launch_forward(args));
}

using Guard = torch::stable::accelerator::DeviceGuard;

}  // namespace

void rms_norm_out(Tensor out, Tensor x, Tensor weight, double eps, bool unit_offset) {
  const DType dtype = check_norm_args("rms_norm", x, weight);
  check_like("rms_norm", "out", out, x);
  const Guard guard(x.get_device_index());
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  into(out, xc, [&](Tensor& dst) {
    run_forward("rms_norm", xc, nullptr, wc, dst, nullptr, eps, unit_offset, dtype);
  });
}

Tensor rms_norm(Tensor x, Tensor weight, double eps, bool unit_offset) {
  check_norm_args("rms_norm", x, weight);
  const Guard guard(x.get_device_index());
  Tensor out = torch::stable::empty_like(torch::stable::contiguous(x));
  rms_norm_out(out, x, weight, eps, unit_offset);
  return out;
}

// residual <- x + residual; out <- rms_norm(residual).
void fused_add_rms_norm_out(Tensor out, Tensor x, Tensor residual, Tensor weight, double eps) {
  const char* op = "fused_add_rms_norm";
  const DType dtype = check_norm_args(op, x, weight);
  check_like(op, "residual", residual, x);
  check_like(op, "out", out, x);
  const Guard guard(x.get_device_index());
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  Tensor sum = torch::stable::contiguous(residual);
  into(out, xc, [&](Tensor& dst) {
    run_forward(op, xc, &sum, wc, dst, &sum, eps, false, dtype);
  });
  if (!same_tensor(sum, residual)) {
    torch::stable::copy_(residual, sum);
  }
}

Tensor fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, double eps) {
  check_norm_args("fused_add_rms_norm", x, weight);
  const Guard guard(x.get_device_index());
  Tensor out = torch::stable::empty_like(torch::stable::contiguous(x));
  fused_add_rms_norm_out(out, x, residual, weight, eps);
  return out;
}

// The functional form autograd differentiates: (rms_norm(x + residual), x + residual).
std::tuple<Tensor, Tensor> add_rms_norm(Tensor x, Tensor residual, Tensor weight, double eps) {
  const char* op = "add_rms_norm";
  const DType dtype = check_norm_args(op, x, weight);
  check_like(op, "residual", residual, x);
  const Guard guard(x.get_device_index());
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor rc = torch::stable::contiguous(residual);
  Tensor out = torch::stable::empty_like(xc);
  Tensor sum = torch::stable::empty_like(xc);
  run_forward(op, xc, &rc, torch::stable::contiguous(weight), out, &sum, eps, false, dtype);
  return {out, sum};
}

// (grad_x, grad_weight); grad_weight is reduced through per-block partial sums
// in a fixed order (see rmsnorm_kernels.cu), so it is the same on every run.
std::tuple<Tensor, Tensor> rms_norm_backward(Tensor grad_out, Tensor x, Tensor weight, double eps,
                                             bool unit_offset) {
  const char* op = "rms_norm_backward";
  const DType dtype = check_norm_args(op, x, weight);
  check_like(op, "grad_out", grad_out, x);
  const Guard guard(x.get_device_index());
  auto [xc, gc, wc, grad_x, grad_w, hidden, rows] =
      rmsnorm_common::backward_tensors(grad_out, x, weight);
  if (rows == 0) {
    torch::stable::zero_(grad_w);  // a sum over no rows
    return {grad_x, grad_w};
  }
  const int device = x.get_device_index();
  const ScalarType acc = dtype == DType::Double ? ScalarType::Double : ScalarType::Float;
  Tensor partial =
      torch::stable::new_empty(xc, {backward_partial_rows(device, rows), hidden}, acc);
  BackwardLaunch args{gc.const_data_ptr(),     xc.const_data_ptr(),     wc.const_data_ptr(),
                      grad_x.mutable_data_ptr(), grad_w.mutable_data_ptr(),
                      partial.mutable_data_ptr(), rows, hidden, eps, unit_offset, dtype,
                      place_of(xc)};
  check_launch(op, launch_backward(args));
  return {grad_x, grad_w};
}

void silu_mul_out(Tensor out, Tensor gate, Tensor up) {
  const char* op = "silu_mul";
  STD_TORCH_CHECK(gate.is_cuda(), op, ": gate must be a CUDA tensor");
  const DType dtype = dtype_of(op, gate);
  check_like(op, "up", up, gate);
  check_like(op, "out", out, gate);
  const Guard guard(gate.get_device_index());
  const Tensor gc = torch::stable::contiguous(gate);
  const Tensor uc = torch::stable::contiguous(up);
  into(out, gc, [&](Tensor& dst) {
    if (gc.numel() == 0) {
      return;
    }
    SiluMulLaunch args{gc.const_data_ptr(), uc.const_data_ptr(), dst.mutable_data_ptr(),
                       gc.numel(), dtype, place_of(gc)};
    check_launch(op, launch_silu_mul(args));
  });
}

Tensor silu_mul(Tensor gate, Tensor up) {
  STD_TORCH_CHECK(gate.is_cuda(), "silu_mul: gate must be a CUDA tensor");
  const Guard guard(gate.get_device_index());
  Tensor out = torch::stable::empty_like(torch::stable::contiguous(gate));
  silu_mul_out(out, gate, up);
  return out;
}

// A GPU build has no CPU loops; these exist so the API (and the tests' loop
// parametrization) behaves the same on every variant.
std::string cpu_capability() {
  return "NONE";
}

std::string set_cpu_capability(std::string capability) {
  STD_TORCH_CHECK(false, "set_cpu_capability: '", capability,
                  "' loops are not available: this is a GPU build of rmsnorm without CPU loops; "
                  "load the CPU variant to compare them");
  return "NONE";
}

}  // namespace rmsnorm_cuda

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("rms_norm", TORCH_BOX(&rmsnorm_cuda::rms_norm));
  ops.impl("rms_norm_out", TORCH_BOX(&rmsnorm_cuda::rms_norm_out));
  ops.impl("rms_norm_backward", TORCH_BOX(&rmsnorm_cuda::rms_norm_backward));
  ops.impl("fused_add_rms_norm", TORCH_BOX(&rmsnorm_cuda::fused_add_rms_norm));
  ops.impl("fused_add_rms_norm_out", TORCH_BOX(&rmsnorm_cuda::fused_add_rms_norm_out));
  ops.impl("add_rms_norm", TORCH_BOX(&rmsnorm_cuda::add_rms_norm));
  ops.impl("silu_mul", TORCH_BOX(&rmsnorm_cuda::silu_mul));
  ops.impl("silu_mul_out", TORCH_BOX(&rmsnorm_cuda::silu_mul_out));
}

// Tensor-free ops have no device to dispatch on.
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, ops) {
  ops.impl("cpu_capability", TORCH_BOX(&rmsnorm_cuda::cpu_capability));
  ops.impl("set_cpu_capability", TORCH_BOX(&rmsnorm_cuda::set_cpu_capability));
}
