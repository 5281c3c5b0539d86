// The loops for x86-64 CPUs with AVX2 + FMA + F16C. The instruction set is
// chosen with a target pragma, not -mavx2 in build.toml, so the part's flags
// stay valid on aarch64; there (or with a compiler other than GCC) this file
// compiles to an absent table and the baseline loops run instead.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
// Only the private loops take 256/512-bit vectors by value.
#pragma GCC diagnostic ignored "-Wpsabi"
#define ROTARY_CAPABILITY "AVX2"
#define ROTARY_KERNEL_TABLE kernel_table_AVX2
#include "kernels_impl.h"
#else
#include "kernels.h"
const rotary_cpu::KernelTable* rotary_cpu::kernel_table_AVX2() {
  return nullptr;
}
#endif
