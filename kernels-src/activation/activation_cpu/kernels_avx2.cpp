// The loops for x86-64 CPUs with AVX2 + FMA (torch's AVX2 level).
//
// The instruction set is chosen here, with a target pragma, not with -mavx2
// in build.toml: the part's flags apply on every system, and -mavx2 would
// break the build on aarch64. Off x86-64 (or with a compiler other than GCC)
// this file compiles to an absent table and the portable loops run instead.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#include "isa_macros.h"
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#define ACTIVATION_KERNEL_TABLE kernel_table_AVX2
#include "kernels_impl.h"
#else
#include "kernels.h"
const activation_cpu::KernelTable* activation_cpu::kernel_table_AVX2() {
  return nullptr;
}
#endif
