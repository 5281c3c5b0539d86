// The loops for x86-64 CPUs with AVX-512 F/BW/VL/DQ (the set torch requires
// for its own AVX512 kernels); see kernels_avx2.cpp for the pragma.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define MAMBA_ISA_AVX512
#include "isa_macros.h"
#define MAMBA_CPU_TABLE cpu_table_AVX512
#define MAMBA_CPU_CAPABILITY "AVX512"
#include "kernels_impl.h"
#else
#include "kernels.h"
const mamba_ssm::CpuTable* mamba_ssm::cpu_table_AVX512() { return nullptr; }
#endif
