// The boundary between the op layer (rotary_cpu.cpp: validation, layouts,
// threads, CPU dispatch) and the vector loops (kernels_impl.h), which are
// compiled once per CPU capability (kernels_{default,avx2,avx512}.cpp). Only
// plain data crosses it, and the loop files include no torch header, so the
// capability-specific objects share no inline code with the rest of the library.
#pragma once

#include <cstdint>

namespace rotary_cpu {

enum class DType { Float32, Float64, BFloat16, Float16 };

// One array seen as [size0, size1, size2, n] with element strides for the
// three outer dimensions and unit stride in the last; stride 0 broadcasts.
struct Operand {
  const void* data;
  int64_t stride[3];
};

// y1 = x1 * cos1 - x2 * sin1, y2 = x2 * cos2 + x1 * sin2 (sin negated when
// `conj`, which is the inverse rotation and the backward). For the
// rotate_half convention x1/x2 are the two halves of each head row. y may be
// x itself (in place): every chunk is loaded before it is stored.
struct RotaryArgs {
  int64_t size[3];
  int64_t n;  // elements per half row
  Operand x1, x2, cos1, cos2, sin1, sin2, y1, y2;
  bool conj;
  DType dtype;
};

// Work is split over rows (i0, i1, i2), i2 fastest: for the usual
// [batch, heads, seq] layout that walks memory front to back, which keeps the
// hardware prefetchers streaming. (Blocking rows so a cos/sin block is reused
// across all heads was tried: the jumps between heads defeat the prefetchers
// and made the kernel 2-4x slower than re-reading cos/sin from L2/L3.)

// One set of loops, compiled for one CPU capability.
struct KernelTable {
  const char* capability;
  void (*rotate)(const RotaryArgs& args, int64_t begin_row, int64_t end_row);
};

// Defined by kernels_<capability>.cpp; nullptr where the compiler or target
// cannot build that capability (e.g. AVX2/AVX-512 on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();

}  // namespace rotary_cpu
