// The argument checks and layout both op layers share (rmsnorm_cpu/rmsnorm_cpu.cpp and
// rmsnorm_cuda/rmsnorm_cuda.cpp), so one message and one rule serve every device. Each
// layer adds only its device check (is_cpu, or a GPU tensor on x's device) and its own
// DType enum, which this header takes as a template parameter. Torch's stable ABI only.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>
#include <sstream>
#include <string>

namespace rmsnorm_common {
// Internal to each op layer (as the layers' own helpers are): torch's stable Tensor has
// hidden visibility, so a struct holding it may not be exported either.
namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

inline std::string shape_of(const Tensor& t) {
  std::ostringstream text;
  text << "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    text << (d ? ", " : "") << t.size(d);
  }
  text << "]";
  return text.str();
}

// The layer's DType of `t` (an enum with Float, Double, BFloat16 and Half).
template <typename DType>
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

// `what` must have the shape and dtype of `x` (its device is the caller's check).
inline void check_shape_dtype(const char* op, const char* what, const Tensor& t,
                              const Tensor& x) {
  STD_TORCH_CHECK(t.sizes().vec() == x.sizes().vec(), op, ": ", what, " must have shape ",
                  shape_of(x), ", got ", shape_of(t));
  STD_TORCH_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", what, " dtype (",
                  torch::headeronly::toString(t.scalar_type()), ") must match x (",
                  torch::headeronly::toString(x.scalar_type()), ")");
}

// x: [..., hidden] of a supported dtype, weight: [hidden] of x's dtype (devices are the
// caller's check). Returns the dtype.
template <typename DType>
DType check_norm_shapes(const char* op, const Tensor& x, const Tensor& weight) {
  const DType dtype = dtype_of<DType>(op, x);
  STD_TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a scalar");
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), op,
                  ": weight must have shape [", x.size(-1), "] (the last dimension of x ",
                  shape_of(x), "), got ", shape_of(weight));
  STD_TORCH_CHECK(weight.scalar_type() == x.scalar_type(), op, ": weight dtype (",
                  torch::headeronly::toString(weight.scalar_type()),
                  ") must match x dtype (", torch::headeronly::toString(x.scalar_type()),
                  "); cast one of them");
  return dtype;
}

// Rows of `hidden` (the last dimension) values in x; none when hidden is 0.
inline int64_t rows_of(const Tensor& x) {
  const int64_t hidden = x.size(-1);
  return hidden == 0 ? 0 : x.numel() / hidden;
}

// rms_norm_backward's inputs in the layout the loops read, and its outputs, allocated.
struct BackwardTensors {
  Tensor x;
  Tensor grad_out;
  Tensor weight;
  Tensor grad_x;
  Tensor grad_w;
  int64_t hidden;
  int64_t rows;
};

inline BackwardTensors backward_tensors(const Tensor& grad_out, const Tensor& x,
                                        const Tensor& weight) {
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  return {xc,
          torch::stable::contiguous(grad_out),
          wc,
          torch::stable::empty_like(xc),
          torch::stable::empty_like(wc),
          xc.size(-1),
          rows_of(xc)};
}

}  // namespace
}  // namespace rmsnorm_common
