// The loops for x86-64 CPUs with AVX2 and FMA. The instruction set is chosen
// with a pragma in the source, not with compiler flags, so the part's flags
// stay valid on every system and the op layer picks a copy at run time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#include "isa_macros.h"
#define MAMBA_CPU_TABLE cpu_table_AVX2
#define MAMBA_CPU_CAPABILITY "AVX2"
#include "kernels_impl.h"
#else
#include "kernels.h"
const mamba_ssm::CpuTable* mamba_ssm::cpu_table_AVX2() { return nullptr; }
#endif
