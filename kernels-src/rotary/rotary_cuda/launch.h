// The boundary between the op layer (rotary_cuda.cpp: checks, layouts, stream;
// compiled by the host compiler against torch's stable ABI) and the device code
// (rotary_kernels.cu, compiled by nvcc or hipcc once per GPU architecture).
// Only plain data crosses it, so the .cu file includes no torch header and
// nvcc's per-architecture passes stay short.
#pragma once

#include <cstdint>

namespace rotary_cuda {

// The element types the GPU kernel is compiled for. float64 is included (unlike
// the norms) because it costs one more small instantiation and lets gradcheck
// run on the device.
enum class DType : int { Float32, Float64, BFloat16, Float16 };

// One array seen as [size0, size1, size2, n] with element strides for the
// three outer dimensions and unit stride in the last; stride 0 broadcasts.
struct Operand {
  const void* data;
  int64_t stride[3];
};

// For every row (i0, i1, i2) of a [size0, size1, size2, head_dim] tensor and
// every pair j < half (half = rot / 2):
//   y[j]        = x[j] * cos[j]               - x[j + half] * sin[j]
//   y[j + half] = x[j + half] * cos[j + half] + x[j] * sin[j + half]
// (sin negated when `conj`: the inverse rotation). Columns rot..head_dim are
// copied from x to y when `copy_tail` (y is another tensor); in place they are
// left alone. y may be x: each thread loads its pair before storing it.
struct RotaryLaunch {
  int64_t size[3];
  int64_t half;      // pairs per row
  int64_t head_dim;  // elements per row (>= 2 * half)
  Operand x, cos, sin, y;
  bool conj;
  bool copy_tail;
  DType dtype;
  void* stream;  // the cudaStream_t / hipStream_t to enqueue on (torch's current one)
};

// Defined in rotary_kernels.cu: enqueues the kernel and returns nullptr, or the
// runtime's message when the launch failed (the op layer raises it).
const char* launch_rotary(const RotaryLaunch& args);

}  // namespace rotary_cuda
