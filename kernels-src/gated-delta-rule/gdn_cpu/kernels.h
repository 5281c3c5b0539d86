// The boundary between the op layer (gdn_cpu.cpp: checks, dtype, threads) and
// the loops (kernels_impl.h), compiled once per CPU capability
// (kernels_{default,avx2,avx512,avx512_bf16}.cpp). Only plain data crosses it.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace gdn_cpu {

// One gated delta rule problem: q, k [B, T, Hk, Dk], v [B, T, Hv, Dv] (any
// strides in B/T/H, unit stride in the head dimension), g and beta
// [B, T, Hv] float32 contiguous, state [B, Hv, Dk, Dv] float32 contiguous
// (holds the initial state on entry and the final state on return), out
// [B, T, Hv, Dv] contiguous in the dtype of q/k/v.
struct GdnArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  float* state;
  void* out;
  int64_t batch, seq, hk, hv, dk, dv;
  int64_t q_stride[3];  // strides of q in elements for B, T, H
  int64_t k_stride[3];
  int64_t v_stride[3];
  float scale;
  bool l2norm;
  int64_t chunk;  // chunk length (chunked form only)
  // Value heads per task (chunked form only): 1, or all Hv / Hk heads of one key
  // head, whose normalised q/k and q.k / k.k products are then computed once.
  int64_t task_heads;
  c10::ScalarType dtype;
};

// The layer's causal depthwise convolution + SiLU in the layout the input
// projection writes: x [B, T, C] (any strides in B/T, unit stride in C), out
// [B, keep, C] contiguous in x's dtype, the last `keep` positions of
// silu(bias + sum_w weight[w][c] x[t - (W - 1) + w][c]). Positions before the
// start read the last columns of `state` [B, C, S >= W - 1] (x's dtype,
// contiguous; the model cache keeps S = W) where given, else 0.
struct ConvArgs {
  const void* x;
  int64_t x_stride[2];  // strides of x in elements for B, T
  const void* state;    // nullable
  int64_t state_width;  // S
  const float* weight;  // [W, C] float32 (transposed from the model's [C, W])
  const float* bias;    // nullable, [C] float32
  void* out;
  int64_t batch, seq, channels, width, keep;
  c10::ScalarType dtype;
};

// One set of loops, compiled for one CPU capability. `recurrent` runs the
// (batch, value-head) problems [begin, end) of `args`, `chunked` the tasks
// [begin, end) of args.task_heads such problems each; `conv` runs the output
// rows [begin, end) of batch * keep.
struct KernelTable {
  const char* capability;
  void (*chunked)(const GdnArgs& args, int64_t begin, int64_t end);
  void (*recurrent)(const GdnArgs& args, int64_t begin, int64_t end);
  void (*conv)(const ConvArgs& args, int64_t begin, int64_t end);
};

// Defined by kernels_<capability>.cpp; nullptr where this compiler/target
// cannot build that copy (e.g. the x86 copies on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();
const KernelTable* kernel_table_AVX512_BF16();

}  // namespace gdn_cpu
