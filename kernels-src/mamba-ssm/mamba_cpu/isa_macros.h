// The ISA macros for the x86-64 copies of the loops. GCC's C++ front end does
// not announce a target pragma through these macros, and the c10 headers the
// loops include pick code by them; the including file sets its pragma first,
// and MAMBA_ISA_AVX512 for the AVX-512 set.
#pragma once

#define __SSE3__ 1
#define __SSSE3__ 1
#define __SSE4_1__ 1
#define __SSE4_2__ 1
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#ifdef MAMBA_ISA_AVX512
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#endif
#pragma GCC diagnostic ignored "-Wpsabi"
