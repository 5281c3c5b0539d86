// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ: the set torch requires
// before it runs its own AVX512 kernels. See kernels_avx2.cpp for why the
// instruction set is chosen with a pragma and the ISA macros are set by hand.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define __SSE3__ 1
#define __SSSE3__ 1
#define __SSE4_1__ 1
#define __SSE4_2__ 1
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
// Only the private loops below take 256/512-bit vectors by value, so the
// "ABI changed" note for such parameters does not concern any caller.
#pragma GCC diagnostic ignored "-Wpsabi"
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#define FLASH_ATTN2_KERNEL_TABLE kernel_table_AVX512
#include "kernels_impl.h"
#else
#include "kernels.h"
const flash_attn2_cpu::KernelTable* flash_attn2_cpu::kernel_table_AVX512() {
  return nullptr;
}
#endif
