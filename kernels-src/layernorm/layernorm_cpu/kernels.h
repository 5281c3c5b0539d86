// The boundary between the op layer (layernorm_cpu.cpp: validation,
// allocation, threads, CPU dispatch) and the loops (kernels_impl.h), which are
// compiled once per CPU capability (kernels_{default,avx2,avx512}.cpp). Only
// plain data crosses it: the loop copies include no torch header, so no torch
// inline function is ever compiled for AVX-512 and picked by the linker for a
// CPU without it.
#pragma once

#include <cstdint>

namespace layernorm_cpu {

enum class DType { Float, Double, BFloat16, Half };

// y = (x - mean) * rstd * w + b per row of `hidden` elements, computed in
// float (double for float64) and rounded once; rstd = 1/sqrt(var + eps) with
// the biased variance, as nn.LayerNorm. A null weight is 1, a null bias 0.
struct ForwardArgs {
  const void* x;
  const void* weight;
  const void* bias;
  void* out;
  int64_t hidden;
  double eps;
  DType dtype;
};

// grad_x of the rows, and this block's share of grad_w and grad_b added into
// `partial` (2 * hidden accumulators: grad_w's, then grad_b's).
struct BackwardArgs {
  const void* grad_out;
  const void* x;
  const void* weight;  // may be null: 1
  void* grad_x;
  int64_t hidden;
  double eps;
  DType dtype;
};

// One set of loops, compiled for one CPU capability. Each entry handles a
// range [begin, end) of rows (forward/backward) or columns (reduce), so the
// op layer owns the threads.
struct KernelTable {
  const char* capability;
  void (*forward)(const ForwardArgs&, int64_t begin, int64_t end);
  void (*backward)(const BackwardArgs&, int64_t begin, int64_t end, void* partial);
  // grad_w[c], grad_b[c] = sums over `blocks` of the partial accumulators.
  void (*reduce)(const void* partial, int64_t blocks, int64_t hidden, void* grad_w, void* grad_b,
                 DType dtype, int64_t begin, int64_t end);
};

// Defined by kernels_<capability>.cpp. A capability the compiler or target
// cannot build returns nullptr (e.g. the AVX tables on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();
const KernelTable* kernel_table_AVX512_BF16();

}  // namespace layernorm_cpu
