// Argument checks shared by the CPU and GPU op layers, so both backends accept
// the same shapes and raise the same messages. Header-only, torch stable ABI.
// `device` names the backend in messages ("CPU", "CUDA"); every tensor must be
// on q's device, which the op layer checked is of its backend.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>

namespace rotary_common {

using torch::stable::Tensor;

inline bool unit_last_stride(const Tensor& t) {
  return t.size(-1) <= 1 || t.stride(-1) == 1;
}

inline bool same_device(const Tensor& t, const Tensor& q) {
  return t.is_cpu() == q.is_cpu() && t.is_cuda() == q.is_cuda() &&
         t.get_device_index() == q.get_device_index();
}

// cos/sin, checked against q and given unit stride in the last dimension.
struct Table {
  Tensor cos;
  Tensor sin;
  int64_t rot;  // rotated elements per head row
};

inline Table check_table(const char* op, const char* device, const Tensor& q, Tensor cos,
                         Tensor sin) {
  STD_TORCH_CHECK(same_device(cos, q) && same_device(sin, q), op, ": cos and sin must be ",
                  device, " tensors on q's device");
  STD_TORCH_CHECK(cos.dim() == 2 || cos.dim() == 3, op,
                  ": cos must be [seq, rot] or [batch or 1, seq, rot], got ", cos.dim(),
                  " dimensions");
  STD_TORCH_CHECK(sin.dim() == cos.dim(), op, ": sin must have the shape of cos");
  for (int64_t d = 0; d < cos.dim(); ++d) {
    STD_TORCH_CHECK(sin.size(d) == cos.size(d), op, ": sin must have the shape of cos (dim ",
                    d, ": ", sin.size(d), " vs ", cos.size(d), ")");
  }
  STD_TORCH_CHECK(cos.scalar_type() == q.scalar_type() && sin.scalar_type() == q.scalar_type(),
                  op, ": cos and sin must have the dtype of q and k");
  const int64_t rot = cos.size(-1);
  STD_TORCH_CHECK(rot % 2 == 0 && rot <= q.size(3), op,
                  ": the last dimension of cos (", rot,
                  ") must be even and at most head_dim (", q.size(3), ")");
  STD_TORCH_CHECK(cos.size(-2) == q.size(2), op, ": cos has ", cos.size(-2),
                  " positions but q has seq length ", q.size(2),
                  " (layout [batch, heads, seq, head_dim])");
  if (cos.dim() == 3) {
    STD_TORCH_CHECK(cos.size(0) == 1 || cos.size(0) == q.size(0), op, ": cos batch (",
                    cos.size(0), ") must be 1 or q's batch (", q.size(0), ")");
  }
  if (!unit_last_stride(cos)) {
    cos = torch::stable::contiguous(cos);
  }
  if (!unit_last_stride(sin)) {
    sin = torch::stable::contiguous(sin);
  }
  return Table{cos, sin, rot};
}

inline void check_head_tensor(const char* op, const char* device, const char* name,
                              const Tensor& t, const Tensor& q) {
  STD_TORCH_CHECK(same_device(t, q), op, ": ", name, " must be a ", device,
                  " tensor on q's device");
  STD_TORCH_CHECK(t.dim() == 4, op, ": ", name,
                  " must be [batch, heads, seq, head_dim], got ", t.dim(), " dimensions");
  STD_TORCH_CHECK(t.scalar_type() == q.scalar_type(), op, ": ", name,
                  " must have the dtype of q");
  STD_TORCH_CHECK(t.size(0) == q.size(0) && t.size(2) == q.size(2), op, ": ", name,
                  " must have q's batch and seq sizes");
}

inline void check_out(const char* op, const char* device, const char* name, const Tensor& out,
                      const Tensor& x) {
  STD_TORCH_CHECK(same_device(out, x) && out.scalar_type() == x.scalar_type() &&
                      out.dim() == 4,
                  op, ": ", name, " must be a ", device,
                  " tensor of the input's dtype and shape, on its device");
  for (int64_t d = 0; d < 4; ++d) {
    STD_TORCH_CHECK(out.size(d) == x.size(d), op, ": ", name,
                    " must have the input's shape (dim ", d, ": ", out.size(d), " vs ",
                    x.size(d), ")");
  }
}

}  // namespace rotary_common
