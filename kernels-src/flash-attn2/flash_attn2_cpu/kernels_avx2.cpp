// The loops for x86-64 CPUs with AVX2 + FMA (torch's AVX2 level).
//
// The instruction set is chosen here, with a target pragma, not with -mavx2
// in build.toml: the part's flags apply on every system, and -mavx2 would
// break the build on aarch64. Off x86-64 (or with a compiler other than GCC)
// this file compiles to an absent table and the portable loops run instead.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
// GCC's C++ front end does not announce a target pragma through the ISA
// macros, and ATen/Sleef headers pick their vector code by those macros.
#define __SSE3__ 1
#define __SSSE3__ 1
#define __SSE4_1__ 1
#define __SSE4_2__ 1
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
// Only the private loops below take 256/512-bit vectors by value, so the
// "ABI changed" note for such parameters does not concern any caller.
#pragma GCC diagnostic ignored "-Wpsabi"
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#define FLASH_ATTN2_KERNEL_TABLE kernel_table_AVX2
#include "kernels_impl.h"
#else
#include "kernels.h"
const flash_attn2_cpu::KernelTable* flash_attn2_cpu::kernel_table_AVX2() {
  return nullptr;
}
#endif
