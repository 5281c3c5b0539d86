// The ops this kernel exposes. Signatures follow the kernel ecosystem's
// `activation` kernel (output first, written in place), so code written
// against that kernel runs unchanged.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

// Gated activations: input [..., 2d] -> out [..., d].
void silu_and_mul(at::Tensor& out, const at::Tensor& input);
void mul_and_silu(at::Tensor& out, const at::Tensor& input);
void gelu_and_mul(at::Tensor& out, const at::Tensor& input);
void gelu_tanh_and_mul(at::Tensor& out, const at::Tensor& input);
void fatrelu_and_mul(at::Tensor& out, const at::Tensor& input, double threshold);

// Elementwise activations: out has the shape of input.
void silu(at::Tensor& out, const at::Tensor& input);
void gelu(at::Tensor& out, const at::Tensor& input);
void gelu_tanh(at::Tensor& out, const at::Tensor& input);
void gelu_fast(at::Tensor& out, const at::Tensor& input);
void gelu_new(at::Tensor& out, const at::Tensor& input);
void gelu_quick(at::Tensor& out, const at::Tensor& input);

// Which vector loops (DEFAULT, AVX2, AVX512) the CPU ops run.
std::string cpu_capability();
// Switches the CPU ops to other loops (one this CPU supports) and returns the
// previous choice; lets tests and benchmarks exercise every compiled copy.
std::string set_cpu_capability(const std::string& capability);
