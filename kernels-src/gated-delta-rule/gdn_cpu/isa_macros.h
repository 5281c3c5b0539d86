// GCC's C++ front end does not announce a target pragma through the ISA
// macros that c10's headers test, so the including file sets its pragma first
// and these macros by hand (GDN_ISA_AVX512 for the AVX-512 set). Only the
// private loops take vectors by value, so the "ABI changed" note is moot.
#pragma once

#define __SSE3__ 1
#define __SSSE3__ 1
#define __SSE4_1__ 1
#define __SSE4_2__ 1
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#ifdef GDN_ISA_AVX512
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#endif
#pragma GCC diagnostic ignored "-Wpsabi"
