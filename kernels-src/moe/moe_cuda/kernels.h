// The CUDA loops of the experts op and their launches (moe_kernels.cu), on torch's
// current stream. Plain pointers and sizes, no ATen types, so the .cu file includes no
// ATen header and nvcc's per-architecture passes stay short; the op layer
// (moe_cuda.cpp) sorts, allocates and runs the GEMMs.
#pragma once

#include <cstdint>

namespace moe_cuda {

// act [rows, inter] = gate(gu [rows, 2 * inter]); see moe_experts in torch_binding.h for
// the activation codes. bf16: the element type is bfloat16, else float32.
struct GateArgs {
  const void* gu;
  void* act;
  int64_t rows, inter, activation;
  bool interleaved, bf16;
  float alpha, limit;
};
void launch_gate(const GateArgs& a);

// out [tokens, h] = sum over slots j of w[t, j] * y[pos[t, j]] (pos < 0: no expert), in
// float32 in slot order, rounded once to out's type (bf16 or float32, as y).
struct ScatterArgs {
  const void* y;
  const int64_t* pos;
  const float* w;
  void* out;
  int64_t tokens, k, h;
  bool bf16;
};
void launch_scatter(const ScatterArgs& a);

}  // namespace moe_cuda
