// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ (torch's AVX512 level).
// See kernels_avx2.cpp for why the instruction set is chosen with a pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
// 512-bit vectors for the loops (GCC otherwise prefers 256-bit ones).
#pragma GCC target("prefer-vector-width=512")
#pragma GCC diagnostic ignored "-Wpsabi"
#define LAYERNORM_CAPABILITY AVX512
// bf16 rows with intrinsics (bf16_rows.h), rounding by bit arithmetic.
#define LAYERNORM_BF16_ROWS
#define LAYERNORM_KERNEL_TABLE kernel_table_AVX512
#include "kernels_impl.h"
#else
#include "kernels.h"
const layernorm_cpu::KernelTable* layernorm_cpu::kernel_table_AVX512() {
  return nullptr;
}
#endif
