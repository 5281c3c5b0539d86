// Argument checks and layout handling shared by every backend's op layer, so
// an op rejects the same inputs with the same message on CPU, CUDA, ROCm,
// Metal and XPU. Header-only: each backend part compiles it into its own
// object, and a variant holds exactly one backend.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace activation_common {

inline bool dtype_in(c10::ScalarType dtype, std::initializer_list<c10::ScalarType> allowed) {
  for (c10::ScalarType candidate : allowed) {
    if (dtype == candidate) {
      return true;
    }
  }
  return false;
}

// Both tensors on `device_type` (and on one device), with one dtype from
// `allowed`; `allowed_text` names them for the message ("float32, bfloat16 or
// float16").
inline void check_tensors(const char* op, const at::Tensor& out, const at::Tensor& input,
                          c10::DeviceType device_type, const char* device_text,
                          std::initializer_list<c10::ScalarType> allowed,
                          const char* allowed_text) {
  TORCH_CHECK(input.device().type() == device_type && out.device().type() == device_type, op,
              ": expected ", device_text, " tensors, got input on ", input.device(),
              " and out on ", out.device());
  TORCH_CHECK(input.device() == out.device(), op,
              ": input and out must be on the same device, got ", input.device(), " and ",
              out.device());
  TORCH_CHECK(dtype_in(input.scalar_type(), allowed), op, ": input dtype must be ",
              allowed_text, " on ", device_text, ", got ", input.scalar_type());
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), op, ": out dtype (",
              out.scalar_type(), ") must match input dtype (", input.scalar_type(), ")");
}

// Gated ops: input [..., 2*d], out [..., d]. Returns d.
inline int64_t check_gated_shapes(const char* op, const at::Tensor& out, const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 1, op, ": input must have at least one dimension, got a scalar");
  const int64_t two_d = input.size(-1);
  TORCH_CHECK(two_d % 2 == 0, op,
              ": the last dimension of input must be even ([..., 2*d]), got ", input.sizes());
  const int64_t d = two_d / 2;
  std::vector<int64_t> expected(input.sizes().begin(), input.sizes().end());
  expected.back() = d;
  TORCH_CHECK(out.sizes() == c10::IntArrayRef(expected), op, ": out must have shape ",
              c10::IntArrayRef(expected), " (input ", input.sizes(),
              " with the last dimension halved), got ", out.sizes());
  return d;
}

// Elementwise ops: out has the shape of input.
inline void check_unary_shapes(const char* op, const at::Tensor& out, const at::Tensor& input) {
  TORCH_CHECK(out.sizes() == input.sizes(), op, ": out must have the shape of input ",
              input.sizes(), ", got ", out.sizes());
}

// The kernels write a contiguous buffer; a strided `out` gets the result
// copied in afterwards (on the tensors' device and stream), so any `out` the
// caller owns is filled correctly.
template <typename Fn>
void into(at::Tensor& out, const Fn& write_contiguous) {
  if (out.is_contiguous()) {
    write_contiguous(out);
    return;
  }
  at::Tensor staging = out.contiguous();
  write_contiguous(staging);
  out.copy_(staging);
}

}  // namespace activation_common
