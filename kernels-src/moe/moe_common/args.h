// The ops' argument checks, shared by every backend's op layer, so a bad call gets the
// same one-line error on the CPU and on CUDA.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/Optional.h>

namespace moe {

inline void check_experts_args(const at::Tensor& hidden, const at::Tensor& index,
                               const at::Tensor& weights, const at::Tensor& gate_up,
                               const at::Tensor& down, int64_t activation, bool transposed,
                               const c10::optional<at::Tensor>& gate_up_bias,
                               const c10::optional<at::Tensor>& down_bias) {
  TORCH_CHECK(hidden.dim() == 2, "moe_experts: hidden must be [tokens, hidden], got ",
              hidden.sizes());
  TORCH_CHECK(index.dim() == 2 && index.size(0) == hidden.size(0),
              "moe_experts: top_k_index must be [tokens, k] with hidden's tokens, got ",
              index.sizes());
  TORCH_CHECK(weights.sizes() == index.sizes(),
              "moe_experts: top_k_weights must have top_k_index's shape ", index.sizes(),
              ", got ", weights.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "moe_experts: top_k_index must be int64 or int32, got ", index.scalar_type());
  const int64_t h = hidden.size(1);
  const int64_t hin = transposed ? 1 : 2, oin = transposed ? 2 : 1;  // gate_up's H and 2I
  TORCH_CHECK(gate_up.dim() == 3 && gate_up.size(hin) == h && gate_up.size(oin) % 2 == 0,
              "moe_experts: gate_up must be [experts, ",
              transposed ? "hidden=" : "2 * intermediate, hidden=", h,
              transposed ? ", 2 * intermediate]" : "]", ", got ", gate_up.sizes());
  const int64_t e = gate_up.size(0), inter = gate_up.size(oin) / 2;
  const bool down_ok = down.dim() == 3 && down.size(0) == e &&
                       down.size(transposed ? 1 : 2) == inter &&
                       down.size(transposed ? 2 : 1) == h;
  TORCH_CHECK(down_ok, "moe_experts: down must be [experts, ",
              transposed ? "intermediate, hidden" : "hidden, intermediate", "] = [", e, ", ",
              transposed ? inter : h, ", ", transposed ? h : inter, "], got ", down.sizes());
  TORCH_CHECK(activation >= 0 && activation <= 3,
              "moe_experts: activation must be 0 (silu), 1 (gelu), 2 (gelu tanh) or 3 "
              "(gpt-oss clamped swiglu), got ", activation);
  auto dtype = hidden.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16,
              "moe_experts: float32 and bfloat16 only, got ", dtype);
  TORCH_CHECK(gate_up.scalar_type() == dtype && down.scalar_type() == dtype,
              "moe_experts: weights must have hidden's dtype ", dtype, ", got ",
              gate_up.scalar_type(), " and ", down.scalar_type());
  TORCH_CHECK(gate_up_bias.has_value() == down_bias.has_value(),
              "moe_experts: give both biases (gate_up_bias and down_bias) or neither");
  if (gate_up_bias.has_value()) {
    TORCH_CHECK(gate_up_bias->sizes() == at::IntArrayRef({e, 2 * inter}) &&
                    down_bias->sizes() == at::IntArrayRef({e, h}),
                "moe_experts: biases must be gate_up_bias [", e, ", ", 2 * inter,
                "] and down_bias [", e, ", ", h, "], got ", gate_up_bias->sizes(), " and ",
                down_bias->sizes());
    TORCH_CHECK(gate_up_bias->scalar_type() == dtype && down_bias->scalar_type() == dtype,
                "moe_experts: biases must have hidden's dtype ", dtype);
  }
}

inline void check_router_args(const at::Tensor& hidden, const at::Tensor& weight,
                              int64_t top_k, int64_t scoring,
                              const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && weight.size(1) == hidden.size(1),
              "moe_router: hidden must be [tokens, hidden] and weight [experts, hidden], got ",
              hidden.sizes(), " and ", weight.sizes());
  const int64_t experts = weight.size(0);
  TORCH_CHECK(top_k >= 1 && top_k <= experts, "moe_router: top_k must be in [1, ", experts,
              "], got ", top_k);
  TORCH_CHECK(scoring == 0 || scoring == 1,
              "moe_router: scoring must be 0 (softmax) or 1 (sigmoid), got ", scoring);
  TORCH_CHECK(!bias.has_value() || bias->numel() == experts,
              "moe_router: bias must have one value per expert (", experts, ")");
}

}  // namespace moe
