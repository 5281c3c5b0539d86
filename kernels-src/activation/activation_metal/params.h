// Shared by activation.metal and activation.mm: the constant block the gated
// kernels read (set with setBytes), laid out the same on both sides.
#pragma once

#ifdef __METAL_VERSION__
typedef uint activation_u32;
#else
#include <cstdint>
typedef uint32_t activation_u32;
#endif

struct GatedParams {
  activation_u32 d;              // output width; the input row is 2 * d
  activation_u32 act_on_second;  // 1: activation on the second half (mul_and_silu)
  float threshold;               // fatrelu only
};
