// Run-time choice, per shape, between these loops and torch's own CPU attention.
//
// The loops win on CPUs whose fastest bf16/fp32 products are vector FMAs and
// VDPBF16PS (1.3-10x sdpa at model shapes on AVX-512), but on AMX machines
// torch's flash attention runs its products as oneDNN matmuls on the tiles, and
// some shapes (short prefill, long decode) come out ahead of ours. Where torch's
// scaled_dot_product_attention computes exactly the same problem, the op times
// both on the first call of each shape bucket, keeps the faster, and reuses that
// choice for the process's life: the attention is never slower than sdpa's by
// more than the timing's noise, whatever the CPU.
#pragma once

#include "../torch-ext/attention_common.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace flash_attn2_cpu {

// What the op is asked to compute, beyond the validated Problem.
struct Request {
  double scale;
  double softcap;
  bool causal;
  bool has_mask;
};

// Whether torch's scaled_dot_product_attention(q, k, v, is_causal, scale,
// enable_gqa=True) computes exactly this problem: no mask, softcap or sliding
// window, equal query and value head dims, and causal only where torch's
// top-left alignment equals ours (bottom-right): Sq == Sk, or one query
// (which then sees every key).
bool torch_equivalent(const flash_attn2::Problem& p, const Request& request);

// The attention by whichever of `ours` (these loops, writing into the tensor
// they are given) and torch's sdpa is faster for this shape bucket; the first
// call of a bucket times both and returns ours. Into `*out` when given; without
// `out`, ours write a fresh flash_attn2::empty_output, and a bucket handed to
// torch returns sdpa's own tensor as it is (no output of ours allocated, nothing
// copied), so the allocating path costs what calling sdpa costs. `capability`
// names the loops `ours` runs (part of the bucket).
at::Tensor run_faster(at::Tensor* out, const at::Tensor& q, const at::Tensor& k,
                      const at::Tensor& v, const flash_attn2::Problem& p,
                      const Request& request, const char* capability,
                      const std::function<void(at::Tensor&)>& ours);

// "auto" (time and choose; the default, or $FLASH_ATTN2_DISPATCH), "kernel"
// (always these loops) or "torch" (torch's sdpa wherever equivalent). Returns
// the previous mode.
std::string set_dispatch(const std::string& mode);

// One line per decided bucket: its shape, the choice and both best times.
std::vector<std::string> dispatch_decisions();

}  // namespace flash_attn2_cpu
