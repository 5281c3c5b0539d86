// The boundary between the op layer (rmsnorm_cuda.cpp: torch's stable ABI,
// compiled by the host compiler) and the device code (rmsnorm_kernels.cu,
// compiled by nvcc or hipcc once per GPU architecture). Only plain data
// crosses it — pointers, sizes and the stream as an opaque handle — so the .cu
// file includes no torch header and the op layer no CUDA header.
#pragma once

#include <cstdint>

namespace rmsnorm_cuda {

// The element types the GPU kernels are compiled for.
enum class DType : int { Float, Double, BFloat16, Half };

// Where a kernel runs: the device index and torch's current stream on it.
struct Place {
  int device;
  void* stream;  // cudaStream_t / hipStream_t
};

// Per row of `hidden` elements (all tensors contiguous): y = x * rstd * w,
// rstd = 1/sqrt(mean(x^2) + eps), with the CPU kernel's rounding (Llama's for
// 16-bit types; unit_offset: * (1 + w) in float, rounded once). With
// `residual`, s = round(x + residual) is normalized and written to `sum`
// (which may be `residual` itself).
struct ForwardLaunch {
  const void* x;
  const void* residual;  // may be null
  const void* weight;
  void* out;
  void* sum;  // non-null iff residual is
  int64_t rows;
  int64_t hidden;
  double eps;
  bool unit_offset;
  DType dtype;
  Place place;
};

// grad_x per row, and grad_w = sum over rows of g * x * rstd, reduced in two
// deterministic passes through `partial` (backward_partial_rows(...) x hidden
// accumulators: float, or double for float64).
struct BackwardLaunch {
  const void* grad_out;
  const void* x;
  const void* weight;
  void* grad_x;
  void* grad_w;
  void* partial;
  int64_t rows;
  int64_t hidden;
  double eps;
  bool unit_offset;
  DType dtype;
  Place place;
};

// out[i] = silu(gate[i]) * up[i] over `numel` contiguous elements.
struct SiluMulLaunch {
  const void* gate;
  const void* up;
  void* out;
  int64_t numel;
  DType dtype;
  Place place;
};

// How many blocks the backward runs (each owns one row of `partial`): a
// function of the device and the row count only, so gradients are
// bit-identical from run to run on the same GPU.
int64_t backward_partial_rows(int device, int64_t rows);

// Enqueue the kernels on `place.stream`. Each returns null on success, else the
// runtime's error text (the op layer turns it into a torch error).
const char* launch_forward(const ForwardLaunch& args);
const char* launch_backward(const BackwardLaunch& args);
const char* launch_silu_mul(const SiluMulLaunch& args);

}  // namespace rmsnorm_cuda
