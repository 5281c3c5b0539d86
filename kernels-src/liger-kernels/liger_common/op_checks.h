// Argument checks shared by the CPU and GPU op layers, so both backends accept
// the same inputs and raise the same messages. Header-only, torch stable ABI;
// the op layer checks the device itself.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>

namespace liger_common {

// x: [..., hidden] of a floating dtype the kernels are compiled for; weight:
// [hidden] of x's dtype. Returns the row count.
inline int64_t check_rms_norm_args(const torch::stable::Tensor& x,
                                   const torch::stable::Tensor& weight) {
  using torch::headeronly::ScalarType;
  using torch::headeronly::toString;
  const ScalarType dtype = x.scalar_type();
  STD_TORCH_CHECK(dtype == ScalarType::Float || dtype == ScalarType::Double ||
                      dtype == ScalarType::BFloat16 || dtype == ScalarType::Half,
                  "liger rms_norm: dtype must be float32, float64, bfloat16 or float16, got ",
                  toString(dtype));
  STD_TORCH_CHECK(x.dim() >= 1, "liger rms_norm: x must have at least one dimension");
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1),
                  "liger rms_norm: weight must have shape [", x.size(-1),
                  "] (the last dimension of x)");
  STD_TORCH_CHECK(weight.scalar_type() == dtype, "liger rms_norm: weight dtype (",
                  toString(weight.scalar_type()), ") must match x dtype (", toString(dtype),
                  ")");
  const int64_t hidden = x.size(-1);
  return hidden == 0 ? 0 : x.numel() / hidden;
}

}  // namespace liger_common
