// The loops for x86-64 CPUs with AVX-512 and its BF16 extension (Zen 4 and
// later, Cooper Lake, Sapphire Rapids and later): the AVX512 copy, with bf16
// results rounded by VCVTNE2PS2BF16 (one instruction and a shuffle per 32
// values instead of about fourteen of bit arithmetic; the same bits, see
// avx512_math.h). Chosen at run time only where the CPU reports avx512_bf16
// (activation_cpu.cpp); see kernels_avx2.cpp for why the instruction set is
// chosen with a pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define ACTIVATION_ISA_AVX512
#include "isa_macros.h"
// at::vec's AVX512 vectors, in a namespace of this copy's own.
#define CPU_CAPABILITY AVX512_BF16
#define CPU_CAPABILITY_AVX512
#define ACTIVATION_HW_BF16
#define ACTIVATION_KERNEL_TABLE kernel_table_AVX512_BF16
#include "kernels_impl.h"
#else
#include "kernels.h"
const activation_cpu::KernelTable* activation_cpu::kernel_table_AVX512_BF16() {
  return nullptr;
}
#endif
