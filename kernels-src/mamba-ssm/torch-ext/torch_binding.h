// The ops this kernel registers (see torch_binding.cpp for their schemas).
// The Python package (torch-ext/mamba_ssm) prepares arguments (dt bias and
// softplus, float weights, broadcast heads) and routes what the loops do not
// cover to the PyTorch formulas, so these ops only see inputs they support.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <tuple>

at::Tensor causal_conv1d_fwd(const at::Tensor& x, const at::Tensor& weight_t,
                             const std::optional<at::Tensor>& bias, bool silu);
at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state,
                                const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, bool silu);
std::tuple<at::Tensor, at::Tensor> ssd_scan(
    const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const std::optional<at::Tensor>& D,
    const std::optional<at::Tensor>& z, const std::optional<at::Tensor>& initial_states,
    int64_t chunk_size, bool return_final_states);
at::Tensor selective_state_update(at::Tensor& state, const at::Tensor& x, const at::Tensor& dt,
                                  const at::Tensor& A, const at::Tensor& B, const at::Tensor& C,
                                  const std::optional<at::Tensor>& D,
                                  const std::optional<at::Tensor>& z);
std::tuple<at::Tensor, at::Tensor> selective_scan(
    const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const std::optional<at::Tensor>& D,
    const std::optional<at::Tensor>& z, bool return_last_state);

// Which CPU loops (DEFAULT, AVX2, AVX512, AVX512_BF16) the CPU ops run.
std::string cpu_capability();
// Switches the CPU ops to other loops this CPU supports; returns the previous.
std::string set_cpu_capability(const std::string& capability);
