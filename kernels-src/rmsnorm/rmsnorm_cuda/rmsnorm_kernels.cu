// The GPU kernels (CUDA, and ROCm through hipcc). RMSNorm is memory-bound, so
// the work is in moving bytes well:
//
// * One block per row (grid-stride over rows beyond the grid), its threads
//   striding over the row with 128-bit accesses (4 floats, 8 halves/bf16s,
//   2 doubles) whenever every pointer is 16-byte aligned and the row width is
//   a multiple of the pack; element accesses otherwise. The pack width is a
//   template parameter, so both paths are the same code.
// * The row is read twice (sum of squares, then scale) rather than kept in
//   shared memory: the second read hits L1/L2, and no hidden size (16384 or
//   more) can outgrow a shared buffer. Shared memory is one value per warp.
// * Reductions: warp shuffles, then the warp sums added in warp order; float
//   accumulation (double for float64). No atomics anywhere, so results are
//   bit-identical from run to run.
// * grad_weight: each backward block adds its rows' contributions into its own
//   row of `partial` (each column owned by one thread, rows in a fixed order),
//   then a second kernel sums the partial rows column by column in block order.
//
// Instantiations are kept few (nvcc repeats them per architecture): one
// forward, backward and silu_mul kernel per (dtype, pack width) and one reduce
// per dtype: 28 kernels.
#include "gpu_common.h"
#include "launch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rmsnorm_cuda {
namespace {

constexpr int kBackwardBlocksPerSm = 2;
constexpr int kElementwiseThreads = 256;
constexpr int kElementwiseBlocksPerSm = 8;
constexpr int kReduceThreads = 256;

template <typename A>
__device__ __forceinline__ A inv_rms(A sum_squares, int64_t hidden, A eps) {
  return A(1) / sqrt(sum_squares / static_cast<A>(hidden) + eps);
}

// x * rstd * w with the CPU kernel's rounding: Llama's round(w * round(x * rstd))
// for 16-bit types, Gemma's round(x * rstd * (1 + w)) with unit_offset.
template <typename T>
__device__ __forceinline__ T scale(T x, T w, acc_t<T> rstd, bool unit_offset) {
  using A = acc_t<T>;
  if (unit_offset) {
    return from_acc<T>(to_acc(x) * rstd * (A(1) + to_acc(w)));
  }
  if constexpr (sizeof(T) >= sizeof(float)) {
    return from_acc<T>(to_acc(w) * (to_acc(x) * rstd));
  } else {
    return from_acc<T>(to_acc(w) * to_acc(from_acc<T>(to_acc(x) * rstd)));
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(const T* x, const T* residual, const T* __restrict__ weight,
                   T* __restrict__ out, T* sum, int64_t rows, int64_t hidden, acc_t<T> eps,
                   bool unit_offset) {
  using A = acc_t<T>;
  using P = Vec<T, V>;
  __shared__ A scratch[kMaxWarps];
  const int64_t packs = hidden / V;
  const P* w = reinterpret_cast<const P*>(weight);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t offset = row * hidden;
    const P* src = reinterpret_cast<const P*>(x + offset);
    A sum_squares = 0;
    if (residual != nullptr) {
      // s = round(x + residual), as PyTorch's add would round; the norm is of s.
      // `sum` may be `residual`: each element is read, then written, by one thread.
      const P* res = reinterpret_cast<const P*>(residual + offset);
      P* s = reinterpret_cast<P*>(sum + offset);
      for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
        const P a = src[i];
        const P b = res[i];
        P r;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          r.v[k] = from_acc<T>(to_acc(a.v[k]) + to_acc(b.v[k]));
          const A v = to_acc(r.v[k]);
          sum_squares += v * v;
        }
        s[i] = r;
      }
      src = s;  // the same thread reads back what it wrote
    } else {
      for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
        const P a = src[i];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const A v = to_acc(a.v[k]);
          sum_squares += v * v;
        }
      }
    }
    const A rstd = inv_rms(block_sum(sum_squares, scratch), hidden, eps);
    P* dst = reinterpret_cast<P*>(out + offset);
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = src[i];
      const P b = w[i];
      P r;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        r.v[k] = scale(a.v[k], b.v[k], rstd, unit_offset);
      }
      dst[i] = r;
    }
  }
}

// y = wt * x * r, r = (mean(x^2) + eps)^-1/2, wt = w (+ 1):
//   dL/dx = r * g * wt - x * r^3 * mean(g * wt * x),   dL/dw = sum_rows g * x * r.
template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                    const T* __restrict__ weight, T* __restrict__ grad_x,
                    acc_t<T>* __restrict__ partial, int64_t rows, int64_t hidden, acc_t<T> eps,
                    bool unit_offset) {
  using A = acc_t<T>;
  using P = Vec<T, V>;
  __shared__ A scratch[kMaxWarps];
  const int64_t packs = hidden / V;
  const A offset_w = unit_offset ? A(1) : A(0);
  const P* w = reinterpret_cast<const P*>(weight);
  A* mine = partial + static_cast<int64_t>(blockIdx.x) * hidden;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * hidden);
    const P* gr = reinterpret_cast<const P*>(grad_out + row * hidden);
    A sum_squares = 0;
    A dot = 0;
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = xr[i];
      const P g = gr[i];
      const P b = w[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A xv = to_acc(a.v[k]);
        sum_squares += xv * xv;
        dot += to_acc(g.v[k]) * (to_acc(b.v[k]) + offset_w) * xv;
      }
    }
    const A r = inv_rms(block_sum(sum_squares, scratch), hidden, eps);
    const A coef = r * r * r * block_sum(dot, scratch) / static_cast<A>(hidden);
    const bool first = row == blockIdx.x;
    P* gx = reinterpret_cast<P*>(grad_x + row * hidden);
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = xr[i];
      const P g = gr[i];
      const P b = w[i];
      P out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A xv = to_acc(a.v[k]);
        const A gv = to_acc(g.v[k]);
        out.v[k] = from_acc<T>(r * gv * (to_acc(b.v[k]) + offset_w) - xv * coef);
        const int64_t c = i * V + k;
        const A contribution = gv * xv * r;
        mine[c] = first ? contribution : mine[c] + contribution;
      }
      gx[i] = out;
    }
  }
}

// grad_w[c] = sum over the partial rows, in row order.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_kernel(const acc_t<T>* __restrict__ partial, int64_t blocks, int64_t hidden,
                  T* __restrict__ grad_w) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < hidden;
       c += stride) {
    A total = 0;
    for (int64_t k = 0; k < blocks; ++k) {
      total += partial[k * hidden + c];
    }
    grad_w[c] = from_acc<T>(total);
  }
}

// silu(g) * u = g * u / (1 + exp(-g)): one exp, no cancellation for negative g;
// exp overflowing to inf gives the correct limit (a signed zero).
template <typename T>
__device__ __forceinline__ T silu_times(T gate, T up) {
  using A = acc_t<T>;
  const A g = to_acc(gate);
  return from_acc<T>(g / (A(1) + exp(-g)) * to_acc(up));
}

template <typename T, int V>
__global__ void __launch_bounds__(kElementwiseThreads)
    silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out,
                    int64_t numel) {
  using P = Vec<T, V>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = numel / V;
  for (int64_t i = first; i < packs; i += stride) {
    const P a = reinterpret_cast<const P*>(gate)[i];
    const P b = reinterpret_cast<const P*>(up)[i];
    P r;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      r.v[k] = silu_times(a.v[k], b.v[k]);
    }
    reinterpret_cast<P*>(out)[i] = r;
  }
  for (int64_t i = packs * V + first; i < numel; i += stride) {  // the tail
    out[i] = silu_times(gate[i], up[i]);
  }
}

// ---- launch ----------------------------------------------------------------

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, std::numeric_limits<int32_t>::max()));
}

template <typename T>
const char* forward_typed(const ForwardLaunch& a) {
  constexpr int kVec = kPack<T>;
  const bool vectorized = a.hidden % kVec == 0 && aligned(a.x) && aligned(a.residual) &&
                          aligned(a.weight) && aligned(a.out) && aligned(a.sum);
  const auto stream = static_cast<gpu_stream_t>(a.place.stream);
  const auto eps = static_cast<acc_t<T>>(a.eps);
  const T* x = static_cast<const T*>(a.x);
  const T* res = static_cast<const T*>(a.residual);
  const T* w = static_cast<const T*>(a.weight);
  T* out = static_cast<T*>(a.out);
  T* sum = static_cast<T*>(a.sum);
  if (vectorized) {
    forward_kernel<T, kVec><<<row_grid(a.rows), row_threads(a.hidden / kVec), 0, stream>>>(
        x, res, w, out, sum, a.rows, a.hidden, eps, a.unit_offset);
  } else {
    forward_kernel<T, 1><<<row_grid(a.rows), row_threads(a.hidden), 0, stream>>>(
        x, res, w, out, sum, a.rows, a.hidden, eps, a.unit_offset);
  }
  return last_launch_error();
}

template <typename T>
const char* backward_typed(const BackwardLaunch& a) {
  constexpr int kVec = kPack<T>;
  const bool vectorized = a.hidden % kVec == 0 && aligned(a.x) && aligned(a.grad_out) &&
                          aligned(a.weight) && aligned(a.grad_x);
  const auto stream = static_cast<gpu_stream_t>(a.place.stream);
  const auto eps = static_cast<acc_t<T>>(a.eps);
  const int64_t blocks = backward_partial_rows(a.place.device, a.rows);
  const T* g = static_cast<const T*>(a.grad_out);
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.weight);
  T* gx = static_cast<T*>(a.grad_x);
  auto* partial = static_cast<acc_t<T>*>(a.partial);
  if (vectorized) {
    backward_kernel<T, kVec><<<static_cast<unsigned>(blocks), row_threads(a.hidden / kVec), 0,
                               stream>>>(g, x, w, gx, partial, a.rows, a.hidden, eps,
                                         a.unit_offset);
  } else {
    backward_kernel<T, 1><<<static_cast<unsigned>(blocks), row_threads(a.hidden), 0, stream>>>(
        g, x, w, gx, partial, a.rows, a.hidden, eps, a.unit_offset);
  }
  if (const char* err = last_launch_error()) {
    return err;
  }
  const auto reduce_blocks = static_cast<unsigned>(
      std::min<int64_t>(ceil_div(a.hidden, kReduceThreads), std::numeric_limits<int32_t>::max()));
  reduce_kernel<T><<<reduce_blocks, kReduceThreads, 0, stream>>>(partial, blocks, a.hidden,
                                                                 static_cast<T*>(a.grad_w));
  return last_launch_error();
}

template <typename T>
const char* silu_mul_typed(const SiluMulLaunch& a) {
  constexpr int kVec = kPack<T>;
  const bool vectorized = aligned(a.gate) && aligned(a.up) && aligned(a.out);
  const auto stream = static_cast<gpu_stream_t>(a.place.stream);
  const int64_t work = vectorized ? ceil_div(a.numel, kVec) : a.numel;
  const int64_t fill =
      static_cast<int64_t>(cached_multiprocessor_count(a.place.device)) * kElementwiseBlocksPerSm;
  const auto blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min(ceil_div(work, kElementwiseThreads), fill)));
  const T* gate = static_cast<const T*>(a.gate);
  const T* up = static_cast<const T*>(a.up);
  T* out = static_cast<T*>(a.out);
  if (vectorized) {
    silu_mul_kernel<T, kVec><<<blocks, kElementwiseThreads, 0, stream>>>(gate, up, out, a.numel);
  } else {
    silu_mul_kernel<T, 1><<<blocks, kElementwiseThreads, 0, stream>>>(gate, up, out, a.numel);
  }
  return last_launch_error();
}

// Calls fn(T{}) with the device storage type of `dtype`.
template <typename Fn>
const char* with_dtype(DType dtype, const Fn& fn) {
  switch (dtype) {
    case DType::Float:
      return fn(float{});
    case DType::Double:
      return fn(double{});
    case DType::BFloat16:
      return fn(bfloat16_t{});
    case DType::Half:
      return fn(half_t{});
  }
  return "rmsnorm: unknown dtype";
}

}  // namespace

int64_t backward_partial_rows(int device, int64_t rows) {
  const int64_t fill =
      static_cast<int64_t>(cached_multiprocessor_count(device)) * kBackwardBlocksPerSm;
  return std::max<int64_t>(1, std::min(rows, fill));
}

const char* launch_forward(const ForwardLaunch& args) {
  return with_dtype(args.dtype, [&](auto tag) { return forward_typed<decltype(tag)>(args); });
}

const char* launch_backward(const BackwardLaunch& args) {
  return with_dtype(args.dtype, [&](auto tag) { return backward_typed<decltype(tag)>(args); });
}

const char* launch_silu_mul(const SiluMulLaunch& args) {
  return with_dtype(args.dtype, [&](auto tag) { return silu_mul_typed<decltype(tag)>(args); });
}

}  // namespace rmsnorm_cuda
