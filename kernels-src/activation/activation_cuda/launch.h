// The boundary between the op layer (activation_cuda.cpp, compiled by the host
// compiler against ATen) and the device code (activation_kernels.cu, compiled
// by nvcc or hipcc once per GPU architecture). Only plain data crosses it, so
// the .cu file includes no ATen header: nvcc parses a .cu file once per
// architecture, and keeping ATen out of it keeps the build short.
#pragma once

#include <cstdint>

namespace activation_cuda {

// The elementwise activations; each has a gated (`*_and_mul`) and a plain form.
enum class Activation : int {
  Silu,       // x * sigmoid(x)
  Gelu,       // 0.5 * x * (1 + erf(x / sqrt(2)))
  GeluTanh,   // tanh approximation (gelu_tanh, gelu_fast and gelu_new)
  GeluQuick,  // x * sigmoid(1.702 x)
  FatRelu,    // x if x > threshold else 0 (gated form only)
};

// The element types the GPU kernels are compiled for.
enum class DType : int { Float, Half, BFloat16 };

// out[r, c] = act(a[r, c]) * b[r, c], with a and b the two halves of row r of
// `input` ([rows, 2 * d], contiguous): a is the first half unless
// `act_on_second` (mul_and_silu); `out` is [rows, d], contiguous.
struct GatedLaunch {
  void* out;
  const void* input;
  int64_t rows;
  int64_t d;
  Activation act;
  bool act_on_second;
  float threshold;  // FatRelu only
  DType dtype;
  int device;  // the CUDA/HIP device index; kernels run on its current torch stream
};

// out[i] = act(input[i]) over `numel` contiguous elements.
struct UnaryLaunch {
  void* out;
  const void* input;
  int64_t numel;
  Activation act;
  DType dtype;
  int device;
};

// Defined in activation_kernels.cu. They enqueue the kernel on torch's current
// stream for `device` and raise (c10::Error) if the launch fails.
void launch_gated(const GatedLaunch& args);
void launch_unary(const UnaryLaunch& args);

}  // namespace activation_cuda
