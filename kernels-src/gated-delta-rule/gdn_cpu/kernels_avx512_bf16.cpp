// The AVX512 loops on CPUs that also have AVX512_BF16 (Zen 4, Cooper Lake,
// Sapphire Rapids and later): bfloat16 outputs are rounded by VCVTNEPS2BF16,
// one instruction per 16 values, instead of bit arithmetic (same bits: both
// round to nearest even). Chosen at run time only where the CPU reports
// avx512bf16 (gdn_cpu.cpp).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define GDN_ISA_AVX512
#include "isa_macros.h"
#define GDN_HW_BF16
#define GDN_KERNEL_TABLE kernel_table_AVX512_BF16
#define GDN_CAPABILITY "AVX512_BF16"
#include "kernels_impl.h"
#else
#include "kernels.h"
const gdn_cpu::KernelTable* gdn_cpu::kernel_table_AVX512_BF16() {
  return nullptr;
}
#endif
