// The CUDA backend (mamba_common/backend.h): the loops and their launches on
// torch's current stream. Only c10's stream and error headers come in, no ATen.
// Straightforward mappings of the recurrences: one thread per
// output element for the conv, one block per (batch, head) with a thread per
// head channel for Mamba-2 (B, C and dt staged in shared memory a chunk of
// tokens at a time), one thread per (batch, channel) for Mamba-1. The
// scan states live in a float workspace laid out so a warp's accesses are
// coalesced ([.., dstate, headdim]).
#include "../mamba_common/backend.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace mamba_ssm {
namespace {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

int blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65535 ? b : 65535);
}

template <typename T>
__global__ void conv_kernel(ConvArgs a) {
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  const int64_t total = a.batch * a.dim * a.len;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    // d fastest, so neighbouring threads read neighbouring channels of a
    // channel-last input.
    const int64_t d = i % a.dim, l = (i / a.dim) % a.len, b = i / (a.dim * a.len);
    float acc = a.bias ? a.bias[d] : 0.0f;
    for (int64_t k = 0; k < a.width; ++k) {
      const int64_t src = l - (a.width - 1) + k;
      if (src >= 0) acc += a.w[k * a.dim + d] * ld(x, b * a.x_sb + d * a.x_sd + src * a.x_sl);
    }
    st(out, b * a.o_sb + d * a.o_sd + l * a.o_sl, a.silu ? silu(acc) : acc);
  }
}

template <typename T>
__global__ void conv_update_kernel(ConvUpdateArgs a) {
  const T* x = static_cast<const T*>(a.x);
  T* state = static_cast<T*>(a.state);
  T* out = static_cast<T*>(a.out);
  const int64_t total = a.batch * a.dim;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = i % a.dim, b = i / a.dim;
    T* sc = state + b * a.s_sb + d * a.s_sd;
    const T* xc = x + b * a.x_sb + d * a.x_sd;
    const int64_t S = a.state_len;
    auto seq = [&](int64_t j) { return j < S ? ld(sc, j * a.s_sl) : ld(xc, (j - S) * a.x_sl); };
    for (int64_t l = 0; l < a.len; ++l) {
      float acc = a.bias ? a.bias[d] : 0.0f;
      for (int64_t k = 0; k < a.width; ++k) acc += a.w[d * a.width + k] * seq(S + l - (a.width - 1) + k);
      st(out, b * a.o_sb + d * a.o_sd + l * a.o_sl, a.silu ? silu(acc) : acc);
    }
    // Shift: new state[j] = seq[len + j]; read before overwrite (increasing j
    // reads positions >= j + len > j).
    for (int64_t j = 0; j < S; ++j) {
      const float v = seq(a.len + j);
      st(sc, j * a.s_sl, v);
    }
  }
}

// One block per (b, h); thread p owns row p of the state, stored as ws[n][p].
// The sequence goes by in tiles of `tile` tokens (the caller's chunk_size, or
// the largest tile whose B, C and dt fit the block's shared memory): the block
// loads a tile's B and C rows together, coalesced, then every thread walks the
// tile's tokens from shared memory.
template <typename T>
__global__ void scan_kernel(ScanArgs a, float* ws, int64_t tile) {
  extern __shared__ float smem[];
  const int64_t item = blockIdx.x, H = a.heads, P = a.headdim, N = a.dstate, L = a.len;
  const int64_t b = item / H, h = item % H, g = h / (H / a.groups);
  const T* x = static_cast<const T*>(a.x);
  const T* Bm = static_cast<const T*>(a.B);
  const T* Cm = static_cast<const T*>(a.C);
  const T* z = static_cast<const T*>(a.z);
  T* y = static_cast<T*>(a.y);
  float* S = ws + item * P * N;
  float* sB = smem;
  float* sC = smem + tile * N;
  float* sdt = smem + 2 * tile * N;
  const float Ah = a.A[h];
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    for (int64_t n = 0; n < N; ++n) S[n * P + p] = a.init ? a.init[(item * P + p) * N + n] : 0.0f;
  }
  for (int64_t t0 = 0; t0 < L; t0 += tile) {
    const int64_t nt = L - t0 < tile ? L - t0 : tile;
    __syncthreads();  // the previous tile is no longer read
    for (int64_t i = threadIdx.x; i < nt * N; i += blockDim.x) {
      const int64_t t = t0 + i / N, n = i % N;
      sB[i] = ld(Bm, b * a.B_sb + t * a.B_sl + g * a.B_sg + n);
      sC[i] = ld(Cm, b * a.C_sb + t * a.C_sl + g * a.C_sg + n);
    }
    for (int64_t i = threadIdx.x; i < nt; i += blockDim.x) sdt[i] = a.dt[(b * L + t0 + i) * H + h];
    __syncthreads();
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
      for (int64_t i = 0; i < nt; ++i) {
        const int64_t t = t0 + i;
        const float dtv = sdt[i];
        const float da = __expf(dtv * Ah);
        const float xv = ld(x, b * a.x_sb + t * a.x_sl + h * a.x_sh + p);
        const float xd = xv * dtv;
        float acc = 0.0f;
        for (int64_t n = 0; n < N; ++n) {
          const float v = da * S[n * P + p] + xd * sB[i * N + n];
          S[n * P + p] = v;
          acc += v * sC[i * N + n];
        }
        if (a.D) acc += a.D[h * P + p] * xv;
        if (z) acc *= silu(ld(z, b * a.z_sb + t * a.z_sl + h * a.z_sh + p));
        st(y, ((b * L + t) * H + h) * P + p, acc);
      }
    }
  }
  if (a.final_state) {
    for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
      for (int64_t n = 0; n < N; ++n) a.final_state[(item * P + p) * N + n] = S[n * P + p];
    }
  }
}

template <typename T, typename ST>
__global__ void step_kernel(StepArgs a) {
  const int64_t item = blockIdx.x, H = a.heads, P = a.headdim, N = a.dstate;
  const int64_t b = item / H, h = item % H, g = h / (H / a.groups);
  const T* x = static_cast<const T*>(a.x);
  const T* Bt = static_cast<const T*>(a.B) + b * a.B_sb + g * a.B_sg;
  const T* Ct = static_cast<const T*>(a.C) + b * a.C_sb + g * a.C_sg;
  const T* z = static_cast<const T*>(a.z);
  ST* state = static_cast<ST*>(a.state) + b * a.s_sb + h * a.s_sh;
  T* out = static_cast<T*>(a.out);
  const float dtv = a.dt[item];
  const float da = __expf(dtv * a.A[h]);
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    const float xv = ld(x, b * a.x_sb + h * a.x_sh + p);
    const float xd = xv * dtv;
    float acc = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
      const float v = da * ld(state, p * N + n) + xd * ld(Bt, n);
      st(state, p * N + n, v);
      acc += v * ld(Ct, n);
    }
    if (a.D) acc += a.D[h * P + p] * xv;
    if (z) acc *= silu(ld(z, b * a.z_sb + h * a.z_sh + p));
    st(out, item * P + p, acc);
  }
}

template <typename T>
__global__ void selective_scan_kernel(SelectiveScanArgs a, float* ws) {
  const int64_t total = a.batch * a.dim, N = a.dstate, L = a.len;
  const T* u = static_cast<const T*>(a.u);
  const T* Bm = static_cast<const T*>(a.B);
  const T* Cm = static_cast<const T*>(a.C);
  const T* z = static_cast<const T*>(a.z);
  T* out = static_cast<T*>(a.out);
  for (int64_t item = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; item < total;
       item += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = item / a.dim, d = item % a.dim, g = d / (a.dim / a.groups);
    float* s = ws + item * N;
    for (int64_t n = 0; n < N; ++n) s[n] = 0.0f;
    const T* Bg = Bm + b * a.B_sb + g * a.B_sg;
    const T* Cg = Cm + b * a.C_sb + g * a.C_sg;
    for (int64_t t = 0; t < L; ++t) {
      const float dl = a.delta[item * L + t];
      const float uv = ld(u, b * a.u_sb + d * a.u_sd + t);
      float acc = 0.0f;
      for (int64_t n = 0; n < N; ++n) {
        const float v = __expf(dl * a.A[d * N + n]) * s[n] + dl * uv * ld(Bg, n * a.B_sn + t);
        s[n] = v;
        acc += v * ld(Cg, n * a.C_sn + t);
      }
      if (a.D) acc += a.D[d] * uv;
      if (z) acc *= silu(ld(z, b * a.z_sb + d * a.z_sd + t));
      st(out, item * L + t, acc);
    }
    if (a.last_state) {
      for (int64_t n = 0; n < N; ++n) a.last_state[item * N + n] = s[n];
    }
  }
}

int threads_for(int64_t width) {
  int t = 32;
  while (t < width && t < 1024) t *= 2;
  return t;
}

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

}  // namespace

void run_conv(const ConvArgs& a) {
  const int64_t total = a.batch * a.dim * a.len;
  if (a.dtype == DType::BFloat16) {
    conv_kernel<__nv_bfloat16><<<blocks_for(total, 256), 256, 0, stream()>>>(a);
  } else {
    conv_kernel<float><<<blocks_for(total, 256), 256, 0, stream()>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void run_conv_update(const ConvUpdateArgs& a) {
  const int64_t total = a.batch * a.dim;
  if (a.dtype == DType::BFloat16) {
    conv_update_kernel<__nv_bfloat16><<<blocks_for(total, 256), 256, 0, stream()>>>(a);
  } else {
    conv_update_kernel<float><<<blocks_for(total, 256), 256, 0, stream()>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The token tile of the scan: the caller's chunk_size, split (same result) to
// the largest tile whose B, C and dt fit the 48 KiB of shared memory a block
// gets without opting in.
int64_t scan_tile(const ScanArgs& a) {
  constexpr int64_t kSharedBytes = 48 * 1024;
  const int64_t per_token = (2 * a.dstate + 1) * static_cast<int64_t>(sizeof(float));
  const int64_t fits = kSharedBytes / per_token;
  TORCH_CHECK(fits >= 1, "ssd_scan: dstate ", a.dstate, " is too large for the CUDA scan (one "
              "token's B and C must fit 48 KiB of shared memory: dstate <= 6143)");
  return a.chunk < fits ? a.chunk : fits;
}

void run_scan(const ScanArgs& a) {
  const unsigned blocks = static_cast<unsigned>(a.batch * a.heads);
  const int threads = threads_for(a.headdim);
  const int64_t tile = scan_tile(a);
  const size_t smem = static_cast<size_t>((2 * a.dstate + 1) * tile) * sizeof(float);
  if (a.dtype == DType::BFloat16) {
    scan_kernel<__nv_bfloat16><<<blocks, threads, smem, stream()>>>(a, a.workspace, tile);
  } else {
    scan_kernel<float><<<blocks, threads, smem, stream()>>>(a, a.workspace, tile);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void run_step(const StepArgs& a) {
  const unsigned blocks = static_cast<unsigned>(a.batch * a.heads);
  const int threads = threads_for(a.headdim);
  if (a.dtype == DType::BFloat16) {
    if (a.state_fp32) {
      step_kernel<__nv_bfloat16, float><<<blocks, threads, 0, stream()>>>(a);
    } else {
      step_kernel<__nv_bfloat16, __nv_bfloat16><<<blocks, threads, 0, stream()>>>(a);
    }
  } else {
    step_kernel<float, float><<<blocks, threads, 0, stream()>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void run_selective_scan(const SelectiveScanArgs& a) {
  const int64_t total = a.batch * a.dim;
  if (a.dtype == DType::BFloat16) {
    selective_scan_kernel<__nv_bfloat16><<<blocks_for(total, 128), 128, 0, stream()>>>(a, a.workspace);
  } else {
    selective_scan_kernel<float><<<blocks_for(total, 128), 128, 0, stream()>>>(a, a.workspace);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace mamba_ssm
