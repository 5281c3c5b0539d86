// One block per row: each thread sums the squares of a strided slice, the
// block reduces them through shared memory (no warp shuffles, so the same code
// is right for 32- and 64-wide warps), then the threads write the row. The
// reduction order depends only on the block size, which depends only on
// `hidden`, so results are the same from run to run.
#include "gpu_common.h"
#include "launch.h"

#include <type_traits>

namespace liger_cuda {
namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same<T, double>::value, double, float>;

template <typename T>
__device__ __forceinline__ Acc<T> widen(T v) { return static_cast<Acc<T>>(v); }
template <>
__device__ __forceinline__ float widen(bfloat16_t v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float widen(half_t v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T narrow(Acc<T> v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ bfloat16_t narrow(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ half_t narrow(float v) { return __float2half(v); }

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                int64_t hidden, Acc<T> eps) {
  using A = Acc<T>;
  __shared__ A partial[kThreads];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = out + row * hidden;
  A sum = 0;
  for (int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    const A v = widen(xr[i]);
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      partial[threadIdx.x] += partial[threadIdx.x + width];
    }
    __syncthreads();
  }
  const A rstd = A(1) / sqrt(partial[0] / static_cast<A>(hidden) + eps);
  for (int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    const T normed = narrow<T>(widen(xr[i]) * rstd);
    yr[i] = narrow<T>(widen(weight[i]) * widen(normed));
  }
}

template <typename T, int kThreads>
void enqueue(const RmsNormLaunch& a) {
  rms_norm_kernel<T, kThreads>
      <<<static_cast<unsigned>(a.rows), kThreads, 0, static_cast<gpu_stream_t>(a.stream)>>>(
          static_cast<const T*>(a.x), static_cast<const T*>(a.weight), static_cast<T*>(a.out),
          a.hidden, static_cast<Acc<T>>(a.eps));
}

// Small rows get a small block, so no thread sits idle past the row's end.
template <typename T>
void enqueue_for(const RmsNormLaunch& a) {
  if (a.hidden <= 256) {
    enqueue<T, 64>(a);
  } else if (a.hidden <= 2048) {
    enqueue<T, 256>(a);
  } else {
    enqueue<T, 1024>(a);
  }
}

}  // namespace

const char* launch_rms_norm(const RmsNormLaunch& args) {
  switch (args.dtype) {
    case DType::Float:
      enqueue_for<float>(args);
      break;
    case DType::Double:
      enqueue_for<double>(args);
      break;
    case DType::BFloat16:
      enqueue_for<bfloat16_t>(args);
      break;
    case DType::Half:
      enqueue_for<half_t>(args);
      break;
  }
  return last_launch_error();
}

}  // namespace liger_cuda
