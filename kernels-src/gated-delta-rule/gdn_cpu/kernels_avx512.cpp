// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ (torch's AVX512 level):
// the 128-wide head rows are eight 16-lane vectors. See kernels_avx2.cpp for
// why the instruction set is chosen with a pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define GDN_ISA_AVX512
#include "isa_macros.h"
#define GDN_KERNEL_TABLE kernel_table_AVX512
#define GDN_CAPABILITY "AVX512"
#include "kernels_impl.h"
#else
#include "kernels.h"
const gdn_cpu::KernelTable* gdn_cpu::kernel_table_AVX512() {
  return nullptr;
}
#endif
