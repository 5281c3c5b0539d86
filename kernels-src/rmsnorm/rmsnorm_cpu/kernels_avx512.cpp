// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ (torch's AVX512 level).
// See kernels_avx2.cpp for why the instruction set is chosen with a pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
// 512-bit vectors for the loops (GCC otherwise prefers 256-bit ones).
#pragma GCC target("prefer-vector-width=512")
#pragma GCC diagnostic ignored "-Wpsabi"
#define RMSNORM_CAPABILITY AVX512
// bf16 rows with intrinsics (bf16_rows.h), rounding by bit arithmetic.
#define RMSNORM_BF16_ROWS
#define RMSNORM_KERNEL_TABLE kernel_table_AVX512
// The gated norm's float32/bf16 rows with AVX2 + FMA intrinsics (gated_avx2.h).
#define RMSNORM_GATED_AVX2
// swiglu_mlp's float32 and bf16 products, several weight rows a pass (dots_avx2.h).
#define RMSNORM_DOTS_AVX2
#include "kernels_impl.h"
#else
#include "kernels.h"
const rmsnorm_cpu::KernelTable* rmsnorm_cpu::kernel_table_AVX512() {
  return nullptr;
}
#endif
