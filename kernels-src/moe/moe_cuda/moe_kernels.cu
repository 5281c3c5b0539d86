// The CUDA loops of the experts op (kernels.h): the gated activation between the two
// GEMMs, and the weighted scatter back to the tokens. One thread per output element,
// grid-stride; neighbouring threads read neighbouring columns. Only c10's stream and
// error headers come in, no ATen.
#include "kernels.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace moe_cuda {
namespace {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float gate_value(float g, float u, int64_t activation, float alpha,
                                            float limit) {
  switch (activation) {
    case 0: return g / (1.0f + expf(-g)) * u;
    case 1: return 0.5f * g * (1.0f + erff(g * 0.70710678118654752f)) * u;
    case 2: return 0.5f * g * (1.0f + tanhf(0.79788456080286536f * (g + 0.044715f * g * g * g))) * u;
    default:
      g = fminf(g, limit);
      u = fminf(fmaxf(u, -limit), limit);
      return (u + 1.0f) * (g / (1.0f + expf(-alpha * g)));
  }
}

int blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65535 ? b : 65535);
}

template <typename T>
__global__ void gate_kernel(GateArgs a) {
  const T* gu = static_cast<const T*>(a.gu);
  T* act = static_cast<T*>(a.act);
  const int64_t total = a.rows * a.inter;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / a.inter, c = i % a.inter;
    const T* row = gu + r * 2 * a.inter;
    const float g = ld(row, a.interleaved ? 2 * c : c);
    const float u = ld(row, a.interleaved ? 2 * c + 1 : a.inter + c);
    st(act, i, gate_value(g, u, a.activation, a.alpha, a.limit));
  }
}

template <typename T>
__global__ void scatter_kernel(ScatterArgs a) {
  const T* y = static_cast<const T*>(a.y);
  T* out = static_cast<T*>(a.out);
  const int64_t total = a.tokens * a.h;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / a.h, c = i % a.h;
    float acc = 0.0f;
    for (int64_t j = 0; j < a.k; ++j) {
      const int64_t p = a.pos[t * a.k + j];
      if (p >= 0) acc += a.w[t * a.k + j] * ld(y, p * a.h + c);
    }
    st(out, i, acc);
  }
}

}  // namespace

void launch_gate(const GateArgs& a) {
  const int64_t total = a.rows * a.inter;
  if (total == 0) return;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  constexpr int kThreads = 256;
  if (a.bf16)
    gate_kernel<__nv_bfloat16><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(a);
  else
    gate_kernel<float><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_scatter(const ScatterArgs& a) {
  const int64_t total = a.tokens * a.h;
  if (total == 0) return;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  constexpr int kThreads = 256;
  if (a.bf16)
    scatter_kernel<__nv_bfloat16><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(a);
  else
    scatter_kernel<float><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace moe_cuda
