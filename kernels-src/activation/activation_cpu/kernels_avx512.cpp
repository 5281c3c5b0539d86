// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ: the set torch requires
// before it runs its own AVX512 kernels. See kernels_avx2.cpp for why the
// instruction set is chosen with a pragma (and isa_macros.h for the macros).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define ACTIVATION_ISA_AVX512
#include "isa_macros.h"
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#define ACTIVATION_KERNEL_TABLE kernel_table_AVX512
#include "kernels_impl.h"
#else
#include "kernels.h"
const activation_cpu::KernelTable* activation_cpu::kernel_table_AVX512() {
  return nullptr;
}
#endif
