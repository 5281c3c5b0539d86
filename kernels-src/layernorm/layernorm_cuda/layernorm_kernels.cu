// The GPU kernels (CUDA, and ROCm through hipcc). LayerNorm is memory-bound,
// so the work is in moving bytes well:
//
// * One block per row (grid-stride over rows beyond the grid), its threads
//   striding over the row with 128-bit accesses (4 floats, 8 halves/bf16s,
//   2 doubles) whenever every pointer is 16-byte aligned and the row width is
//   a multiple of the pack; element accesses otherwise. The pack width is a
//   template parameter, so both paths are the same code.
// * Two-pass variance (mean, then squared deviations from it), exact even when
//   |mean| >> std, as the CPU kernel. The row is re-read from L1/L2 for each
//   pass rather than staged in shared memory, so no hidden size can outgrow a
//   shared buffer; shared memory is one value per warp.
// * Reductions: warp shuffles, then the warp sums added in warp order; float
//   accumulation (double for float64). No atomics, so results are
//   bit-identical from run to run.
// * grad_weight/grad_bias: each backward block adds its rows' contributions
//   into its own partial row (each column owned by one thread, rows in a fixed
//   order); a second kernel sums the partial rows column by column in order.
//
// One forward and one backward kernel per (dtype, pack width), one reduce per
// dtype: 20 kernels.
#include "gpu_common.h"
#include "launch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace layernorm_cuda {

namespace {

constexpr int kBackwardBlocksPerSm = 2;
constexpr int kReduceThreads = 256;

// p[i], or a pack of ones when p is null (no weight).
template <typename T, int V>
__device__ __forceinline__ Vec<T, V> load_or_ones(const Vec<T, V>* p, int64_t i) {
  if (p != nullptr) {
    return p[i];
  }
  Vec<T, V> ones;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    ones.v[k] = from_acc<T>(acc_t<T>(1));
  }
  return ones;
}

// The row's mean and 1/sqrt(biased variance + eps), returned to every thread.
template <typename T, int V>
__device__ __forceinline__ void row_moments(const Vec<T, V>* x, int64_t packs, int64_t hidden,
                                            acc_t<T> eps, acc_t<T>* scratch, acc_t<T>& mean,
                                            acc_t<T>& rstd) {
  using A = acc_t<T>;
  A sum = 0;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const Vec<T, V> a = x[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      sum += to_acc(a.v[k]);
    }
  }
  mean = block_sum(sum, scratch) / static_cast<A>(hidden);
  A squares = 0;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const Vec<T, V> a = x[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A d = to_acc(a.v[k]) - mean;
      squares += d * d;
    }
  }
  const A var = block_sum(squares, scratch) / static_cast<A>(hidden);
  rstd = A(1) / sqrt(var + eps);
}

template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                   const T* __restrict__ bias, T* __restrict__ out, int64_t rows, int64_t hidden,
                   acc_t<T> eps) {
  using A = acc_t<T>;
  using P = Vec<T, V>;
  __shared__ A scratch[kMaxWarps];
  const int64_t packs = hidden / V;
  const P* w = reinterpret_cast<const P*>(weight);
  const P* b = reinterpret_cast<const P*>(bias);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * hidden);
    A mean, rstd;
    row_moments<T, V>(xr, packs, hidden, eps, scratch, mean, rstd);
    P* dst = reinterpret_cast<P*>(out + row * hidden);
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = xr[i];
      P wv, bv;  // one 128-bit load each, when given
      if (w != nullptr) {
        wv = w[i];
      }
      if (b != nullptr) {
        bv = b[i];
      }
      P r;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        A y = (to_acc(a.v[k]) - mean) * rstd;
        if (w != nullptr) {
          y *= to_acc(wv.v[k]);
        }
        if (b != nullptr) {
          y += to_acc(bv.v[k]);
        }
        r.v[k] = from_acc<T>(y);
      }
      dst[i] = r;
    }
  }
}

// xhat = (x - mean) * rstd, y = xhat * w + b:
//   dL/dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)),
//   dL/dw = sum_rows g * xhat,  dL/db = sum_rows g.
template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                    const T* __restrict__ weight, T* __restrict__ grad_x,
                    acc_t<T>* __restrict__ partial, int64_t rows, int64_t hidden, acc_t<T> eps) {
  using A = acc_t<T>;
  using P = Vec<T, V>;
  __shared__ A scratch[kMaxWarps];
  const int64_t packs = hidden / V;
  const P* w = reinterpret_cast<const P*>(weight);
  A* partial_w = partial + 2 * static_cast<int64_t>(blockIdx.x) * hidden;
  A* partial_b = partial_w + hidden;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * hidden);
    const P* gr = reinterpret_cast<const P*>(grad_out + row * hidden);
    A mean, rstd;
    row_moments<T, V>(xr, packs, hidden, eps, scratch, mean, rstd);
    A sum_gw = 0;
    A sum_gw_xhat = 0;
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = xr[i];
      const P g = gr[i];
      const P wv = load_or_ones(w, i);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A gw = to_acc(g.v[k]) * to_acc(wv.v[k]);
        sum_gw += gw;
        sum_gw_xhat += gw * ((to_acc(a.v[k]) - mean) * rstd);
      }
    }
    const A mean_gw = block_sum(sum_gw, scratch) / static_cast<A>(hidden);
    const A mean_gw_xhat = block_sum(sum_gw_xhat, scratch) / static_cast<A>(hidden);
    const bool first = row == blockIdx.x;
    P* gx = reinterpret_cast<P*>(grad_x + row * hidden);
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = xr[i];
      const P g = gr[i];
      const P wv = load_or_ones(w, i);
      P out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A gv = to_acc(g.v[k]);
        const A xhat = (to_acc(a.v[k]) - mean) * rstd;
        out.v[k] = from_acc<T>(rstd * (gv * to_acc(wv.v[k]) - mean_gw - xhat * mean_gw_xhat));
        const int64_t c = i * V + k;
        partial_w[c] = first ? gv * xhat : partial_w[c] + gv * xhat;
        partial_b[c] = first ? gv : partial_b[c] + gv;
      }
      gx[i] = out;
    }
  }
}

// grad_w[c], grad_b[c] = sums over the partial rows, in row order.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_kernel(const acc_t<T>* __restrict__ partial, int64_t blocks, int64_t hidden,
                  T* __restrict__ grad_w, T* __restrict__ grad_b) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < hidden;
       c += stride) {
    A total_w = 0;
    A total_b = 0;
    for (int64_t k = 0; k < blocks; ++k) {
      total_w += partial[2 * k * hidden + c];
      total_b += partial[(2 * k + 1) * hidden + c];
    }
    grad_w[c] = from_acc<T>(total_w);
    grad_b[c] = from_acc<T>(total_b);
  }
}

// ---- launch ----------------------------------------------------------------

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, std::numeric_limits<int32_t>::max()));
}

template <typename T>
const char* forward_typed(const ForwardLaunch& a) {
  constexpr int kVec = kPack<T>;
  const bool vectorized = a.hidden % kVec == 0 && aligned(a.x) && aligned(a.weight) &&
                          aligned(a.bias) && aligned(a.out);
  const auto stream = static_cast<gpu_stream_t>(a.place.stream);
  const auto eps = static_cast<acc_t<T>>(a.eps);
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  T* out = static_cast<T*>(a.out);
  if (vectorized) {
    forward_kernel<T, kVec><<<row_grid(a.rows), row_threads(a.hidden / kVec), 0, stream>>>(
        x, w, b, out, a.rows, a.hidden, eps);
  } else {
    forward_kernel<T, 1><<<row_grid(a.rows), row_threads(a.hidden), 0, stream>>>(
        x, w, b, out, a.rows, a.hidden, eps);
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
                               stream>>>(g, x, w, gx, partial, a.rows, a.hidden, eps);
  } else {
    backward_kernel<T, 1><<<static_cast<unsigned>(blocks), row_threads(a.hidden), 0, stream>>>(
        g, x, w, gx, partial, a.rows, a.hidden, eps);
  }
  if (const char* err = last_launch_error()) {
    return err;
  }
  const auto reduce_blocks = static_cast<unsigned>(
      std::min<int64_t>(ceil_div(a.hidden, kReduceThreads), std::numeric_limits<int32_t>::max()));
  reduce_kernel<T><<<reduce_blocks, kReduceThreads, 0, stream>>>(
      partial, blocks, a.hidden, static_cast<T*>(a.grad_w), static_cast<T*>(a.grad_b));
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
  return "layernorm: unknown dtype";
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

}  // namespace layernorm_cuda
