// The CUDA/ROCm op: check arguments, make the tensors contiguous, allocate and
// enqueue the kernel on torch's current stream of x's device. Only torch's
// stable ABI is used (the stream comes through the stable C shim), so one build
// loads on every CUDA torch from 2.13 on; the device code is behind launch.h.
#include "../liger_common/op_checks.h"
#include "launch.h"
#include "registration.h"

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace liger_cuda {
namespace {

// The kernels' element type (the dtype was checked by check_rms_norm_args).
DType dtype_of(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Double:
      return DType::Double;
    case ScalarType::BFloat16:
      return DType::BFloat16;
    case ScalarType::Half:
      return DType::Half;
    default:
      return DType::Float;
  }
}

}  // namespace
}  // namespace liger_cuda

Tensor rms_norm(Tensor x, Tensor weight, double eps) {
  STD_TORCH_CHECK(x.is_cuda() && weight.is_cuda() &&
                      x.get_device_index() == weight.get_device_index(),
                  "liger rms_norm: x and weight must be CUDA tensors on the same device");
  const int64_t rows = liger_common::check_rms_norm_args(x, weight);
  const liger_cuda::DType dtype = liger_cuda::dtype_of(x.scalar_type());
  const int device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  Tensor out = torch::stable::empty_like(xc);
  const int64_t hidden = xc.size(-1);
  STD_TORCH_CHECK(rows <= INT32_MAX, "liger rms_norm: at most 2^31-1 rows per call, got ", rows);
  if (rows == 0) {
    return out;
  }
  liger_cuda::RmsNormLaunch args{xc.const_data_ptr(),
                                 wc.const_data_ptr(),
                                 out.mutable_data_ptr(),
                                 rows,
                                 hidden,
                                 eps,
                                 dtype,
                                 torch::stable::accelerator::getCurrentStream(device).nativeHandle()};
  const char* error = liger_cuda::launch_rms_norm(args);
  STD_TORCH_CHECK(error == nullptr, "liger rms_norm: GPU kernel launch failed: ", error);
  return out;
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("rms_norm", TORCH_BOX(&rms_norm));
}
