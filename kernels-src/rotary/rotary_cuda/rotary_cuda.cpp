// The GPU ops (CUDA, and ROCm through the same sources): check arguments with
// the CPU layer's checks, describe each tensor as a pointer and strides, and
// enqueue the kernel on torch's current stream of q's device. Only torch's
// stable ABI is used, so one build loads on every CUDA torch >= 2.13.
#include "../rotary_common/op_checks.h"
#include "../torch-ext/torch_binding.h"
#include "launch.h"

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

using rotary_common::Table;
using rotary_common::unit_last_stride;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace rotary_cuda {
namespace {

constexpr const char* kDevice = "CUDA";

DType to_dtype(const char* op, ScalarType type) {
  switch (type) {
    case ScalarType::Float:
      return DType::Float32;
    case ScalarType::Double:
      return DType::Float64;
    case ScalarType::BFloat16:
      return DType::BFloat16;
    case ScalarType::Half:
      return DType::Float16;
    default:
      STD_TORCH_CHECK(false, op, ": dtype must be float32, float64, bfloat16 or float16");
  }
  return DType::Float32;
}

Operand table_operand(const Tensor& t) {
  const bool batched = t.dim() == 3 && t.size(0) > 1;
  return Operand{t.data_ptr(), {batched ? t.stride(0) : 0, 0, t.stride(-2)}};
}

Operand head_operand(const Tensor& t) {
  return Operand{t.data_ptr(), {t.stride(0), t.stride(1), t.stride(2)}};
}

// q's checks that the shared ones (which compare with q) cannot make.
void check_q(const char* op, const Tensor& q, const Tensor& k) {
  STD_TORCH_CHECK(q.is_cuda(), op, ": q must be a CUDA tensor");
  rotary_common::check_head_tensor(op, kDevice, "q", q, q);
  rotary_common::check_head_tensor(op, kDevice, "k", k, q);
  to_dtype(op, q.scalar_type());
}

// y = rotate(x); y may be x (in place). Columns past `rot` are copied by the
// kernel when y is another tensor, so the result is whole either way.
void rotate(const char* op, const Tensor& x, const Tensor& y, const Table& table, bool conj) {
  STD_TORCH_CHECK(unit_last_stride(x) && unit_last_stride(y), op,
                  ": tensors must have unit stride in head_dim (the last dimension); call "
                  ".contiguous() first");
  if (x.numel() == 0) {
    return;
  }
  const int32_t device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const RotaryLaunch args{
      {x.size(0), x.size(1), x.size(2)},
      table.rot / 2,
      x.size(3),
      head_operand(x),
      table_operand(table.cos),
      table_operand(table.sin),
      head_operand(y),
      conj,
      y.data_ptr() != x.data_ptr() && table.rot < x.size(3),
      to_dtype(op, x.scalar_type()),
      torch::stable::accelerator::getCurrentStream(device).nativeHandle(),
  };
  const char* error = launch_rotary(args);
  STD_TORCH_CHECK(error == nullptr, op, ": the kernel launch failed: ", error);
}

}  // namespace
}  // namespace rotary_cuda

using namespace rotary_cuda;

void apply_rotary(Tensor q, Tensor k, Tensor cos, Tensor sin) {
  const char* op = "apply_rotary";
  check_q(op, q, k);
  const Table table = rotary_common::check_table(op, kDevice, q, cos, sin);
  STD_TORCH_CHECK(table.rot <= k.size(3), op, ": cos is wider than k's head_dim");
  rotate(op, q, q, table, false);
  rotate(op, k, k, table, false);
}

void apply_rotary_out(Tensor q_out, Tensor k_out, Tensor q, Tensor k, Tensor cos, Tensor sin,
                      bool conj) {
  const char* op = "apply_rotary_out";
  check_q(op, q, k);
  rotary_common::check_out(op, kDevice, "q_out", q_out, q);
  rotary_common::check_out(op, kDevice, "k_out", k_out, k);
  const Table table = rotary_common::check_table(op, kDevice, q, cos, sin);
  STD_TORCH_CHECK(table.rot <= k.size(3), op, ": cos is wider than k's head_dim");
  rotate(op, unit_last_stride(q) ? q : torch::stable::contiguous(q), q_out, table, conj);
  rotate(op, unit_last_stride(k) ? k : torch::stable::contiguous(k), k_out, table, conj);
}

std::tuple<Tensor, Tensor> rotary(Tensor q, Tensor k, Tensor cos, Tensor sin, bool conj) {
  const char* op = "rotary";
  check_q(op, q, k);
  const Table table = rotary_common::check_table(op, kDevice, q, cos, sin);
  STD_TORCH_CHECK(table.rot <= k.size(3), op, ": cos is wider than k's head_dim");
  // empty_like keeps the input's layout, as the CPU op and the fake do.
  const Tensor q_src = unit_last_stride(q) ? q : torch::stable::contiguous(q);
  const Tensor k_src = unit_last_stride(k) ? k : torch::stable::contiguous(k);
  Tensor q_out = torch::stable::empty_like(q_src);
  Tensor k_out = torch::stable::empty_like(k_src);
  rotate(op, q_src, q_out, table, conj);
  rotate(op, k_src, k_out, table, conj);
  return {q_out, k_out};
}
