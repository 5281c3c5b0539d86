// The AVX-512 loops on CPUs that also have AVX512_BF16 (Zen 4, Cooper Lake,
// Sapphire Rapids and later): bf16 results are rounded by VCVTNEPS2BF16
// instead of bit arithmetic (the same round-to-nearest-even bits).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define MAMBA_ISA_AVX512
#include "isa_macros.h"
#define MAMBA_HW_BF16
#define MAMBA_CPU_TABLE cpu_table_AVX512_BF16
#define MAMBA_CPU_CAPABILITY "AVX512_BF16"
#include "kernels_impl.h"
#else
#include "kernels.h"
const mamba_ssm::CpuTable* mamba_ssm::cpu_table_AVX512_BF16() { return nullptr; }
#endif
