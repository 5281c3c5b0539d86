// The boundary between the op layer (layernorm_cuda.cpp: torch's stable ABI,
// compiled by the host compiler) and the device code (layernorm_kernels.cu,
// compiled by nvcc or hipcc once per GPU architecture). Only plain data
// crosses it — pointers, sizes and the stream as an opaque handle — so the .cu
// file includes no torch header and the op layer no CUDA header.
#pragma once

#include <cstdint>

namespace layernorm_cuda {

// The element types the GPU kernels are compiled for.
enum class DType : int { Float, Double, BFloat16, Half };

// Where a kernel runs: the device index and torch's current stream on it.
struct Place {
  int device;
  void* stream;  // cudaStream_t / hipStream_t
};

// Per row of `hidden` elements (all contiguous): y = (x - mean) * rstd * w + b,
// rstd = 1/sqrt(var + eps) with the biased two-pass variance, computed in
// float (double for float64) and rounded once. A null weight is 1, a null
// bias 0.
struct ForwardLaunch {
  const void* x;
  const void* weight;
  const void* bias;
  void* out;
  int64_t rows;
  int64_t hidden;
  double eps;
  DType dtype;
  Place place;
};

// grad_x per row; grad_w = sum over rows of g * xhat and grad_b = sum of g,
// reduced in two deterministic passes through `partial`
// (backward_partial_rows(...) x 2 x hidden accumulators: float, or double for
// float64; grad_w's then grad_b's per partial row).
struct BackwardLaunch {
  const void* grad_out;
  const void* x;
  const void* weight;  // may be null: 1
  void* grad_x;
  void* grad_w;
  void* grad_b;
  void* partial;
  int64_t rows;
  int64_t hidden;
  double eps;
  DType dtype;
  Place place;
};

// How many blocks the backward runs (each owns one partial row): a function of
// the device and the row count only, so gradients are bit-identical from run
// to run on the same GPU.
int64_t backward_partial_rows(int device, int64_t rows);

// Enqueue the kernels on `place.stream`. Each returns null on success, else the
// runtime's error text (the op layer turns it into a torch error).
const char* launch_forward(const ForwardLaunch& args);
const char* launch_backward(const BackwardLaunch& args);

}  // namespace layernorm_cuda
