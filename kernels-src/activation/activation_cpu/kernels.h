// The boundary between the op layer (activation_cpu.cpp: validation, dtype and
// CPU dispatch) and the vectorized loops (kernels_impl.h), which are compiled
// once per CPU capability (kernels_{default,avx2,avx512}.cpp). Only plain data
// crosses it, so the capability-specific objects share no tensor code.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace activation_cpu {

// The elementwise activations; each has a gated (`*_and_mul`) and a plain form.
enum class Activation {
  Silu,       // x * sigmoid(x)
  Gelu,       // 0.5 * x * (1 + erf(x / sqrt(2)))
  GeluTanh,   // tanh approximation: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
  GeluQuick,  // x * sigmoid(1.702 x)
  FatRelu,    // x if x > threshold else 0
};

// out[r, c] = act(a[r, c]) * b[r, c], with a and b the two halves of row r of
// `input` ([rows, 2 * d], contiguous): a is the first half unless
// `act_on_second` (mul_and_silu), and `out` is [rows, d], contiguous.
struct GatedArgs {
  void* out;
  const void* input;
  int64_t rows;
  int64_t d;
  Activation act;
  bool act_on_second;
  float threshold;  // FatRelu only
  c10::ScalarType dtype;
};

// out[i] = act(input[i]) over `numel` contiguous elements.
struct UnaryArgs {
  void* out;
  const void* input;
  int64_t numel;
  Activation act;
  c10::ScalarType dtype;
};

// One set of loops, compiled for one CPU capability.
struct KernelTable {
  const char* capability;
  void (*gated)(const GatedArgs&);
  void (*unary)(const UnaryArgs&);
};

// Defined by kernels_<capability>.cpp. A capability the compiler or target
// cannot build returns nullptr (e.g. AVX2/AVX-512 tables on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();
const KernelTable* kernel_table_AVX512_BF16();

}  // namespace activation_cpu
