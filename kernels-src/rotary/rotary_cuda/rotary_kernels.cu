// The rotary kernel: one thread per pair (or per VEC pairs with 128-bit loads
// where every row is 16-byte aligned), a 2-D block of rows x pairs, and a
// grid-stride loop over the flattened (batch, head, seq) rows. No torch header
// is included (see launch.h); the host passes pointers, strides and a stream.
#include "launch.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

// CUDA and HIP differ here only in header names, the bfloat16 type and the
// error calls; hipify rewrites the CUDA branch, and a direct hipcc compile
// (-x hip) takes the HIP branch.
#if defined(__HIPCC__) || defined(USE_ROCM)
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
using gpu_stream_t = hipStream_t;
using bfloat16_t = __hip_bfloat16;
#define ROTARY_GET_LAST_ERROR() hipGetLastError()
#define ROTARY_SUCCESS hipSuccess
#define ROTARY_ERROR_STRING(e) hipGetErrorString(e)
__device__ __forceinline__ bfloat16_t rotary_float_to_bf16(float v) { return __float2bfloat16(v); }
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
using gpu_stream_t = cudaStream_t;
using bfloat16_t = __nv_bfloat16;
#define ROTARY_GET_LAST_ERROR() cudaGetLastError()
#define ROTARY_SUCCESS cudaSuccess
#define ROTARY_ERROR_STRING(e) cudaGetErrorString(e)
__device__ __forceinline__ bfloat16_t rotary_float_to_bf16(float v) {
  return __float2bfloat16_rn(v);
}
#endif

namespace rotary_cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kMaxPairThreads = 128;  // threads along a row; longer rows loop
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // the rest is the grid-stride loop
constexpr int kVectorBytes = 16;

// Arithmetic type: float for the 16- and 32-bit types (bf16/fp16 rounded once
// at the store), double for float64.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ __forceinline__ Acc<T> load_acc(T v) {
  return static_cast<Acc<T>>(v);
}
template <>
__device__ __forceinline__ float load_acc<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float load_acc<bfloat16_t>(bfloat16_t v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T store_acc(Acc<T> v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half store_acc<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ bfloat16_t store_acc<bfloat16_t>(float v) {
  return rotary_float_to_bf16(v);
}

// VEC consecutive elements moved as one 16-byte access (VEC == 1: one element).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, VEC>*>(p);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& pack) {
  *reinterpret_cast<Pack<T, VEC>*>(p) = pack;
}

__device__ __forceinline__ int64_t offset_of(const int64_t (&stride)[3], int64_t i0, int64_t i1,
                                             int64_t i2) {
  return i0 * stride[0] + i1 * stride[1] + i2 * stride[2];
}

// blockDim = (pair threads, rows per block). threadIdx.x walks a row's pairs
// VEC at a time; x and y may alias, so neither is __restrict__ and every pair
// is loaded before it is stored (by the same thread).
template <typename T, int VEC>
__global__ void rotary_kernel(const RotaryLaunch a) {
  const int64_t rows = a.size[0] * a.size[1] * a.size[2];
  const int64_t half = a.half;
  const int64_t rot = 2 * half;
  const Acc<T> sign = a.conj ? Acc<T>(-1) : Acc<T>(1);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t i2 = row % a.size[2];
    const int64_t rest = row / a.size[2];
    const int64_t i1 = rest % a.size[1];
    const int64_t i0 = rest / a.size[1];
    const T* x = static_cast<const T*>(a.x.data) + offset_of(a.x.stride, i0, i1, i2);
    const T* c = static_cast<const T*>(a.cos.data) + offset_of(a.cos.stride, i0, i1, i2);
    const T* s = static_cast<const T*>(a.sin.data) + offset_of(a.sin.stride, i0, i1, i2);
    T* y = const_cast<T*>(static_cast<const T*>(a.y.data)) + offset_of(a.y.stride, i0, i1, i2);
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * VEC; j < half;
         j += static_cast<int64_t>(blockDim.x) * VEC) {
      const Pack<T, VEC> x1 = load_pack<T, VEC>(x + j);
      const Pack<T, VEC> x2 = load_pack<T, VEC>(x + half + j);
      const Pack<T, VEC> c1 = load_pack<T, VEC>(c + j);
      const Pack<T, VEC> c2 = load_pack<T, VEC>(c + half + j);
      const Pack<T, VEC> s1 = load_pack<T, VEC>(s + j);
      const Pack<T, VEC> s2 = load_pack<T, VEC>(s + half + j);
      Pack<T, VEC> y1;
      Pack<T, VEC> y2;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const Acc<T> a1 = load_acc(x1.v[e]);
        const Acc<T> a2 = load_acc(x2.v[e]);
        y1.v[e] = store_acc<T>(a1 * load_acc(c1.v[e]) - sign * a2 * load_acc(s1.v[e]));
        y2.v[e] = store_acc<T>(a2 * load_acc(c2.v[e]) + sign * a1 * load_acc(s2.v[e]));
      }
      store_pack<T, VEC>(y + j, y1);
      store_pack<T, VEC>(y + half + j, y2);
    }
    if (a.copy_tail) {  // partial rotary into another tensor: the rest passes through
      for (int64_t col = rot + threadIdx.x; col < a.head_dim; col += blockDim.x) {
        y[col] = x[col];
      }
    }
  }
}

bool aligned(const Operand& op, int64_t element_size) {
  if (reinterpret_cast<std::uintptr_t>(op.data) % kVectorBytes != 0) {
    return false;
  }
  for (int64_t stride : op.stride) {
    if ((stride * element_size) % kVectorBytes != 0) {
      return false;
    }
  }
  return true;
}

template <typename T>
const char* launch_typed(const RotaryLaunch& a) {
  constexpr int vec = kVectorBytes / static_cast<int>(sizeof(T));
  const int64_t bytes = sizeof(T);
  // 128-bit accesses need every row start (x, y, cos, sin and their + half)
  // on a 16-byte boundary; anything else takes the one-element path.
  const bool vectorize = a.half % vec == 0 && aligned(a.x, bytes) && aligned(a.y, bytes) &&
                         aligned(a.cos, bytes) && aligned(a.sin, bytes);
  const int64_t step = vectorize ? vec : 1;
  const int64_t work = std::max((a.half + step - 1) / step, a.copy_tail ? a.head_dim - 2 * a.half
                                                                         : int64_t{0});
  int threads_x = 1;
  while (threads_x < work && threads_x < kMaxPairThreads) {
    threads_x *= 2;
  }
  const int rows_per_block = kBlockThreads / threads_x;
  const int64_t rows = a.size[0] * a.size[1] * a.size[2];
  const int64_t blocks = std::min((rows + rows_per_block - 1) / rows_per_block, kMaxBlocks);
  const dim3 block(threads_x, rows_per_block);
  auto stream = static_cast<gpu_stream_t>(a.stream);
  if (vectorize) {
    rotary_kernel<T, vec><<<static_cast<unsigned>(blocks), block, 0, stream>>>(a);
  } else {
    rotary_kernel<T, 1><<<static_cast<unsigned>(blocks), block, 0, stream>>>(a);
  }
  const auto error = ROTARY_GET_LAST_ERROR();
  return error == ROTARY_SUCCESS ? nullptr : ROTARY_ERROR_STRING(error);
}

}  // namespace

const char* launch_rotary(const RotaryLaunch& args) {
  const int64_t rows = args.size[0] * args.size[1] * args.size[2];
  if (rows == 0 || (args.half == 0 && !args.copy_tail)) {
    return nullptr;
  }
  switch (args.dtype) {
    case DType::Float32:
      return launch_typed<float>(args);
    case DType::Float64:
      return launch_typed<double>(args);
    case DType::BFloat16:
      return launch_typed<bfloat16_t>(args);
    case DType::Float16:
      return launch_typed<__half>(args);
  }
  return "rotary: unknown dtype";
}

}  // namespace rotary_cuda
