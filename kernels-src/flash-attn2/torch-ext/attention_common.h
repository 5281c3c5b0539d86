// Argument checks and mask preparation shared by every backend's attention op,
// so the CPU and CUDA ops accept exactly the same inputs and fail with the
// same messages.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace flash_attn2 {

// A validated attention problem. q is [B, Hq, Sq, D], k is [B, Hkv, Sk, D],
// v is [B, Hkv, Sk, Dv], the output [B, Hq, Sq, Dv].
struct Problem {
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim_v;
  // Keys visible to query i: [i + (Sk - Sq) - left, i + (Sk - Sq) + right];
  // a negative bound is unbounded. Causal attention is (left, 0).
  int64_t window_left, window_right;
  // The mask as an additive float32 tensor expanded to [B, Hq, Sq, Sk] (batch,
  // head and query strides may be 0; last stride 1), or undefined.
  at::Tensor mask;
};

// Checks shapes, dtypes and devices (raising what was wrong and what is
// expected) and converts the mask; `out` is checked when given.
Problem prepare(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& mask, double scale, bool causal,
                int64_t window_left, int64_t window_right, double softcap,
                const at::Tensor* out);

// A fresh output for the problem, [B, Hq, Sq, Dv] in q's dtype and device: a transposed
// [B, Sq, Hq, Dv] buffer where q is one (Transformers' layout), else contiguous; the
// layout torch's CPU sdpa returns, and the one the fake describes.
at::Tensor empty_output(const at::Tensor& q, const at::Tensor& v);

// `t` ([B, Hq, Sq, Dv]) as a view with exactly empty_output's strides for this q, where
// it addresses the same memory as such a tensor (strides differing only on dimensions of
// size 1); nullopt otherwise.
std::optional<at::Tensor> in_output_layout(const at::Tensor& q, const at::Tensor& t);

// The kernels write outputs whose last dimension is contiguous; any other
// `out` is filled through a staging tensor.
template <typename Fn>
void write_into(at::Tensor& out, const Fn& write) {
  if (out.numel() == 0) {
    return;
  }
  if (out.stride(-1) == 1) {
    write(out);
    return;
  }
  at::Tensor staging = out.contiguous();
  write(staging);
  out.copy_(staging);
}

// A tensor with the same values whose last dimension is contiguous (a view
// when it already is), so kernels can read rows with plain strides.
at::Tensor rows_contiguous(const at::Tensor& t);

}  // namespace flash_attn2
