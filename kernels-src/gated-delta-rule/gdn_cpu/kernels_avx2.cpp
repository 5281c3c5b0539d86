// The loops for x86-64 CPUs with AVX2 + FMA. The instruction set is chosen
// with a target pragma rather than -mavx2 in build.toml, so the part's flags
// stay valid on aarch64, where this file compiles to an absent table.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#include "isa_macros.h"
#define GDN_KERNEL_TABLE kernel_table_AVX2
#define GDN_CAPABILITY "AVX2"
#include "kernels_impl.h"
#else
#include "kernels.h"
const gdn_cpu::KernelTable* gdn_cpu::kernel_table_AVX2() {
  return nullptr;
}
#endif
