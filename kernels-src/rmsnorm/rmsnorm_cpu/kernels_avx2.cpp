// The loops for x86-64 CPUs with AVX2 + FMA (torch's AVX2 level).
//
// The instruction set is chosen here with a target pragma, not with -mavx2 in
// build.toml: the part's flags apply on every system, and -mavx2 would break
// the build on aarch64. Off x86-64 (or with a compiler other than GCC) this
// file compiles to an absent table and the baseline loops run instead. The
// loops include no torch header (see kernels.h), so nothing compiled here can
// be shared with, and picked by the linker for, the baseline copy.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
// Only the private loops take wide vectors by value, so the "ABI changed"
// note for such parameters concerns no caller.
#pragma GCC diagnostic ignored "-Wpsabi"
#define RMSNORM_CAPABILITY AVX2
#define RMSNORM_KERNEL_TABLE kernel_table_AVX2
// The gated norm's float32/bf16 rows with AVX2 + FMA intrinsics (gated_avx2.h).
#define RMSNORM_GATED_AVX2
// swiglu_mlp's float32 and bf16 products, several weight rows a pass (dots_avx2.h).
#define RMSNORM_DOTS_AVX2
#include "kernels_impl.h"
#else
#include "kernels.h"
const rmsnorm_cpu::KernelTable* rmsnorm_cpu::kernel_table_AVX2() {
  return nullptr;
}
#endif
