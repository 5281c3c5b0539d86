// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ (the set torch requires
// for its own AVX512 kernels). See kernels_avx2.cpp for why a pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#pragma GCC diagnostic ignored "-Wpsabi"
#define ROTARY_CAPABILITY "AVX512"
#define ROTARY_KERNEL_TABLE kernel_table_AVX512
#include "kernels_impl.h"
#else
#include "kernels.h"
const rotary_cpu::KernelTable* rotary_cpu::kernel_table_AVX512() {
  return nullptr;
}
#endif
