// The ops this kernel exposes (torch stable ABI). Layout: q and k are
// [batch, heads, seq, head_dim] (what Transformers passes after transpose),
// cos and sin [seq, rot] or [batch or 1, seq, rot] with rot <= head_dim, even;
// the first rot elements of each head row are rotated in the rotate_half
// convention (first half against second half), the rest are left as they are.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <string>
#include <tuple>

// q and k rotated in place.
void apply_rotary(torch::stable::Tensor q, torch::stable::Tensor k, torch::stable::Tensor cos,
                  torch::stable::Tensor sin);

// Rotated copies written into caller-owned q_out / k_out; `conj` rotates by -sin.
void apply_rotary_out(torch::stable::Tensor q_out, torch::stable::Tensor k_out,
                      torch::stable::Tensor q, torch::stable::Tensor k,
                      torch::stable::Tensor cos, torch::stable::Tensor sin, bool conj);

// Rotated copies in fresh tensors (the differentiable form).
std::tuple<torch::stable::Tensor, torch::stable::Tensor> rotary(
    torch::stable::Tensor q, torch::stable::Tensor k, torch::stable::Tensor cos,
    torch::stable::Tensor sin, bool conj);

// CPU builds only: which vector loops (DEFAULT, AVX2, AVX512) the ops run, and a switch for
// tests and benchmarks that compare them (returns the previous choice).
std::string cpu_capability();
std::string set_cpu_capability(std::string capability);
