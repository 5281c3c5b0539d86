// The loops for x86-64 CPUs with AVX-512 and its BF16 extension (VDPBF16PS:
// Zen 4 and later, Cooper Lake, Sapphire Rapids and later). Everything of the
// AVX512 copy, plus bfloat16 attention that multiplies q, k and v in bf16
// (twice the multiplies per instruction of float FMAs) instead of widening
// them to float first. Chosen at run time only where the CPU reports
// avx512_bf16 (attention_cpu.cpp); see kernels_avx2.cpp for why the
// instruction set is chosen with a pragma and the ISA macros are set by hand.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define FLASH_ATTN2_ISA_AVX512
#include "isa_macros.h"
// at::vec's AVX-512 vectors, in a namespace of their own (at::vec::AVX512_BF16):
// inline functions compiled with this target never stand in for the AVX512 copy's.
#define CPU_CAPABILITY AVX512_BF16
#define CPU_CAPABILITY_AVX512
#define FLASH_ATTN2_BF16_DOT
#define FLASH_ATTN2_KERNEL_TABLE kernel_table_AVX512_BF16
// The same loops with ATen's brgemm for the bf16 products (AMX where present).
#define FLASH_ATTN2_BRGEMM_TABLE kernel_table_BRGEMM_BF16
#include "kernels_impl.h"
#else
#include "kernels.h"
const flash_attn2_cpu::KernelTable* flash_attn2_cpu::kernel_table_AVX512_BF16() {
  return nullptr;
}
const flash_attn2_cpu::KernelTable* flash_attn2_cpu::kernel_table_BRGEMM_BF16() {
  return nullptr;
}
#endif
