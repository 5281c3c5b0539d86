// The ops this kernel exposes, per backend. Layout is [batch, heads, seq,
// head_dim] (torch's scaled_dot_product_attention layout); the Python package
// adds FlashAttention-2's [batch, seq, heads, head_dim] entry points on top.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

// out = attention(q, k, v): see flash_attn2_cpu/kernels.h for the exact definition.
void attention_out_cpu(at::Tensor& out, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v, const std::optional<at::Tensor>& attn_mask,
                       double scale, bool causal, int64_t window_left, int64_t window_right,
                       double softcap);
at::Tensor attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
                         int64_t window_left, int64_t window_right, double softcap);

void attention_out_cuda(at::Tensor& out, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const std::optional<at::Tensor>& attn_mask,
                        double scale, bool causal, int64_t window_left, int64_t window_right,
                        double softcap);
at::Tensor attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
                          int64_t window_left, int64_t window_right, double softcap);

// Which vector loops (DEFAULT, AVX2, AVX512) the CPU op runs, and a switch
// for tests and benchmarks (returns the previous choice).
std::string cpu_capability();
std::string set_cpu_capability(const std::string& capability);

// How the CPU op chooses between its loops and torch's own sdpa per shape
// (flash_attn2_cpu/dispatch.h): "auto", "kernel" or "torch"; returns the
// previous mode. And the choices made so far, one line each.
std::string set_attention_dispatch(const std::string& mode);
std::vector<std::string> attention_dispatch_decisions();
