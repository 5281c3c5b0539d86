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
  c10::ScalarType dtype;
};

// One set of loops, compiled for one CPU capability. Each runs the
// (batch, value-head) problems [begin, end) of `args`.
struct KernelTable {
  const char* capability;
  void (*chunked)(const GdnArgs& args, int64_t begin, int64_t end);
  void (*recurrent)(const GdnArgs& args, int64_t begin, int64_t end);
};

// Defined by kernels_<capability>.cpp; nullptr where this compiler/target
// cannot build that copy (e.g. the x86 copies on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();
const KernelTable* kernel_table_AVX512_BF16();

}  // namespace gdn_cpu
