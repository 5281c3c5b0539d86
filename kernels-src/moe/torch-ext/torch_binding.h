// The ops this kernel exposes (see torch-ext/moe/__init__.py for their contracts).
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

// Fused mixture-of-experts MLP: for each (token, slot) of top_k_index, the expert's
// act(x W_gate^T) * (x W_up^T) W_down^T, weighted by top_k_weights and summed per
// token. gate_up: [E, 2I, H] ([gate; up] concatenated, or gate and up columns
// alternating when interleaved), down: [E, H, I]; transposed: [E, H, 2I] and [E, I, H].
// Optional biases gate_up_bias [E, 2I] and down_bias [E, H] (both or neither).
// activation: 0 silu, 1 gelu (erf), 2 gelu (tanh), 3 gpt-oss's clamped SwiGLU
// ((clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit)).
// gemm_rows >= 1: experts with at least that many rows use ATen's GEMMs (else the
// per-CPU table decides). Slots whose expert is outside [0, E) contribute nothing
// (expert-parallel sentinels).
at::Tensor moe_experts(const at::Tensor& hidden, const at::Tensor& top_k_index,
                       const at::Tensor& top_k_weights, const at::Tensor& gate_up,
                       const at::Tensor& down, int64_t activation,
                       const c10::optional<at::Tensor>& gate_up_bias,
                       const c10::optional<at::Tensor>& down_bias, bool transposed,
                       bool interleaved, double alpha, double limit, int64_t gemm_rows);

// Top-k router: logits = hidden weight^T (in hidden's dtype), then per token
// either softmax over experts, top-k, renormalised (scoring 0), or sigmoid of
// the (optionally soft-capped) logits, top-k of sigmoid + bias, renormalised
// (scoring 1). Returns (logits, weights [T, k] in hidden's dtype, indices [T, k]).
// Scoring 1 returns float32 logits, as the models that use it do.
std::tuple<at::Tensor, at::Tensor, at::Tensor> moe_router(
    const at::Tensor& hidden, const at::Tensor& weight, int64_t top_k, int64_t scoring,
    const c10::optional<at::Tensor>& bias, double softcap);
