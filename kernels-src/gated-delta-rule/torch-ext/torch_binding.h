// The ops this kernel exposes. Each returns (out, final_state): out
// [B, T, Hv, Dv] in the dtype of q/k/v, final_state [B, Hv, Dk, Dv] float32.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

std::tuple<at::Tensor, at::Tensor> chunk_gated_delta_rule_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, double scale, const std::optional<at::Tensor>& initial_state,
    bool use_qk_l2norm, int64_t chunk_size);

std::tuple<at::Tensor, at::Tensor> recurrent_gated_delta_rule_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, double scale, const std::optional<at::Tensor>& initial_state,
    bool use_qk_l2norm);

#if defined(CPU_KERNEL)
// The layer's causal depthwise convolution + SiLU over x [B, T, C] (the input
// projection's layout, no transpose), the last `keep` positions, out [B, keep, C];
// positions before the start read the last columns of `state` [B, C, S >= W - 1],
// which then holds the last S inputs (decode; the model cache keeps S = W), else zeros.
at::Tensor causal_conv1d_silu(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias,
                              const std::optional<at::Tensor>& state, int64_t keep);
// Which vector loops (DEFAULT, AVX2, AVX512, AVX512_BF16) the CPU ops run.
std::string cpu_capability();
// Switches the CPU ops to other compiled loops (one this CPU supports) and
// returns the previous choice, so tests and benchmarks can run every copy.
std::string set_cpu_capability(const std::string& capability);
#endif
