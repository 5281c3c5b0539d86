// The loops for x86-64 CPUs with AVX-512 and its BF16 extension (Zen 4 and
// later, Cooper Lake, Sapphire Rapids and later): the AVX512 copy, with bf16
// results rounded by VCVTNE2PS2BF16 (one instruction per 32 values instead of
// ten of bit arithmetic; same bits, see bf16_rows.h). Chosen at run time
// only where the CPU reports avx512_bf16 (rmsnorm_cpu.cpp); see
// kernels_avx2.cpp for why the instruction set is chosen with a pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#pragma GCC target("prefer-vector-width=512")
#pragma GCC diagnostic ignored "-Wpsabi"
#define RMSNORM_CAPABILITY AVX512_BF16
#define RMSNORM_KERNEL_TABLE kernel_table_AVX512_BF16
// The gated norm's float32/bf16 rows with AVX2 + FMA intrinsics (gated_avx2.h).
#define RMSNORM_GATED_AVX2
// swiglu_mlp's float32 and bf16 products, several weight rows a pass (dots_avx2.h).
#define RMSNORM_DOTS_AVX2
#define RMSNORM_BF16_ROWS
#define RMSNORM_HW_BF16
// swiglu_mlp's bf16 products by VDPBF16PS (bf16_rows.h: pair_dots).
#define RMSNORM_BF16_DOT
#include "kernels_impl.h"
#else
#include "kernels.h"
const rmsnorm_cpu::KernelTable* rmsnorm_cpu::kernel_table_AVX512_BF16() {
  return nullptr;
}
#endif
