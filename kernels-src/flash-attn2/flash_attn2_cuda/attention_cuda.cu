// The CUDA op (c10/cuda headers only: the toolkit here has no cuSPARSE/cuBLAS
// headers, which ATen/cuda/CUDAContext.h would pull in): a straightforward
// tiled attention with an online softmax.
//
// One block handles kRowsPerBlock query rows of one (batch, head), one warp per
// row. The block walks the keys its rows can see in tiles of 32 (one key per
// lane): the tile's keys and values are staged in shared memory as float, each
// lane scores its key against the warp's query row, the warp combines the
// tile's max and sum with shuffles, and each lane accumulates head_dim / 32
// output features. Same definition as the CPU op (see flash_attn2_cpu/kernels.h):
// causal = window (left, 0) with the diagonal bottom-right aligned, additive
// float mask, softcap, GQA, rows with no visible key written as zeros.
#include "../torch-ext/attention_common.h"
#include "../torch-ext/torch_binding.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>

namespace flash_attn2_cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;
constexpr int kMaxHeadDim = 256;

struct Params {
  const void* q;
  const void* k;
  const void* v;
  const float* mask;
  void* out;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, m_sb, m_sh, m_ss, o_sb, o_sh,
      o_ss;
  int heads_q, group, seq_q, seq_k, head_dim, head_dim_v;
  float scale, softcap;
  int64_t window_left, window_right;
};

__device__ __forceinline__ int64_t clamp_hi(int64_t a, int64_t b) {
  return a < b ? a : b;
}

__device__ __forceinline__ int64_t clamp_lo(int64_t a, int64_t b) {
  return a > b ? a : b;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

__device__ __forceinline__ int64_t key_lo(const Params& p, int64_t i) {
  const int64_t offset = p.seq_k - p.seq_q;
  if (p.window_left < 0) return 0;
  return clamp_hi(clamp_lo(i + offset - p.window_left, 0), p.seq_k);
}

__device__ __forceinline__ int64_t key_hi(const Params& p, int64_t i) {
  const int64_t offset = p.seq_k - p.seq_q;
  if (p.window_right < 0) return p.seq_k;
  return clamp_hi(clamp_lo(i + offset + p.window_right + 1, 0), p.seq_k);
}

// kPerLane = ceil(head_dim_v / 32) output features per lane, kept in registers.
template <typename scalar_t, int kPerLane>
__global__ void attention_kernel(Params p) {
  extern __shared__ float smem[];
  const int d = p.head_dim;
  const int dv = p.head_dim_v;
  const int k_pitch = d + 1;  // odd pitch: lanes reading their own key row hit distinct banks
  float* k_tile = smem;                                // [32][d + 1]
  float* v_tile = k_tile + kWarp * k_pitch;            // [32][dv]
  float* q_rows = v_tile + kWarp * dv;                 // [kRowsPerBlock][d]

  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int b = blockIdx.z;
  const int h = blockIdx.y;
  const int hk = h / p.group;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock;
  const int64_t row = row0 + warp;
  const bool active = row < p.seq_q;

  const auto* q = static_cast<const scalar_t*>(p.q) + b * p.q_sb + h * p.q_sh;
  const auto* k = static_cast<const scalar_t*>(p.k) + b * p.k_sb + hk * p.k_sh;
  const auto* v = static_cast<const scalar_t*>(p.v) + b * p.v_sb + hk * p.v_sh;
  if (active) {
    for (int c = lane; c < d; c += kWarp) {
      q_rows[warp * d + c] = static_cast<float>(q[row * p.q_ss + c]);
    }
  }
  const int64_t last_row = clamp_hi(row0 + kRowsPerBlock, p.seq_q) - 1;
  const int64_t block_lo = key_lo(p, row0);
  const int64_t block_hi = key_hi(p, last_row);
  const int64_t lo = active ? key_lo(p, row) : 0;
  const int64_t hi = active ? key_hi(p, row) : 0;
  const float* mask_row =
      (p.mask != nullptr && active) ? p.mask + b * p.m_sb + h * p.m_sh + row * p.m_ss : nullptr;
  const bool capped = p.softcap > 0.0f;
  const float pre = capped ? p.scale / p.softcap : p.scale;

  float acc[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) acc[t] = 0.0f;
  float row_max = -INFINITY;
  float row_sum = 0.0f;

  for (int64_t k0 = block_lo; k0 < block_hi; k0 += kWarp) {
    __syncthreads();  // the previous tile is no longer read
    const int tile = static_cast<int>(clamp_hi(kWarp, block_hi - k0));
    for (int idx = threadIdx.x; idx < tile * d; idx += blockDim.x) {
      const int j = idx / d, c = idx % d;
      k_tile[j * k_pitch + c] = static_cast<float>(k[(k0 + j) * p.k_ss + c]);
    }
    for (int idx = threadIdx.x; idx < tile * dv; idx += blockDim.x) {
      const int j = idx / dv, c = idx % dv;
      v_tile[j * dv + c] = static_cast<float>(v[(k0 + j) * p.v_ss + c]);
    }
    __syncthreads();
    if (!active) continue;

    const int64_t key = k0 + lane;
    float s = -INFINITY;
    if (lane < tile && key >= lo && key < hi) {
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot += q_rows[warp * d + c] * k_tile[lane * k_pitch + c];
      s = capped ? p.softcap * tanhf(dot * pre) : dot * pre;
      if (mask_row != nullptr) s += mask_row[key];
    }
    const float new_max = fmaxf(row_max, warp_max(s));
    if (new_max == -INFINITY) continue;  // nothing visible yet
    const float correction = __expf(row_max - new_max);
    const float prob = s == -INFINITY ? 0.0f : __expf(s - new_max);
    row_sum = row_sum * correction + warp_sum(prob);
    row_max = new_max;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) acc[t] *= correction;
    for (int j = 0; j < tile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, prob, j);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int c = lane + t * kWarp;
        if (c < dv) acc[t] += pj * v_tile[j * dv + c];
      }
    }
  }
  if (!active) return;
  const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  auto* out = static_cast<scalar_t*>(p.out) + b * p.o_sb + h * p.o_sh + row * p.o_ss;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int c = lane + t * kWarp;
    if (c < dv) out[c] = static_cast<scalar_t>(acc[t] * inv);
  }
}

template <typename scalar_t, int kPerLane>
void launch(const Params& p, int batch, cudaStream_t stream) {
  const dim3 grid((p.seq_q + kRowsPerBlock - 1) / kRowsPerBlock, p.heads_q, batch);
  const size_t smem = sizeof(float) * (kWarp * (p.head_dim + 1) + kWarp * p.head_dim_v +
                                       kRowsPerBlock * p.head_dim);
  auto kernel = attention_kernel<scalar_t, kPerLane>;
  C10_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<grid, kRowsPerBlock * kWarp, smem, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void launch_for_dim(const Params& p, int batch, cudaStream_t stream) {
  if (p.head_dim_v <= 64) return launch<scalar_t, 2>(p, batch, stream);
  if (p.head_dim_v <= 128) return launch<scalar_t, 4>(p, batch, stream);
  return launch<scalar_t, 8>(p, batch, stream);
}

void run(at::Tensor& out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
         const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
         int64_t window_left, int64_t window_right, double softcap) {
  constexpr const char* op = "flash_attn2.attention";
  const flash_attn2::Problem pr = flash_attn2::prepare(
      op, q, k, v, attn_mask, scale, causal, window_left, window_right, softcap, &out);
  TORCH_CHECK(q.is_cuda(), op, ": the CUDA op got tensors on ", q.device());
  TORCH_CHECK(pr.head_dim <= kMaxHeadDim && pr.head_dim_v <= kMaxHeadDim, op,
              ": the CUDA kernel supports head_dim up to ", kMaxHeadDim, ", got ", pr.head_dim,
              " / ", pr.head_dim_v);
  if (out.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(q.device());
  const at::Tensor qc = flash_attn2::rows_contiguous(q);
  const at::Tensor kc = flash_attn2::rows_contiguous(k);
  const at::Tensor vc = flash_attn2::rows_contiguous(v);
  flash_attn2::write_into(out, [&](at::Tensor& dst) {
    Params p{};
    p.q = qc.const_data_ptr();
    p.k = kc.const_data_ptr();
    p.v = vc.const_data_ptr();
    p.out = dst.data_ptr();
    p.q_sb = qc.stride(0), p.q_sh = qc.stride(1), p.q_ss = qc.stride(2);
    p.k_sb = kc.stride(0), p.k_sh = kc.stride(1), p.k_ss = kc.stride(2);
    p.v_sb = vc.stride(0), p.v_sh = vc.stride(1), p.v_ss = vc.stride(2);
    p.o_sb = dst.stride(0), p.o_sh = dst.stride(1), p.o_ss = dst.stride(2);
    if (pr.mask.defined()) {
      p.mask = pr.mask.const_data_ptr<float>();
      p.m_sb = pr.mask.stride(0), p.m_sh = pr.mask.stride(1), p.m_ss = pr.mask.stride(2);
    }
    p.heads_q = static_cast<int>(pr.heads_q);
    p.group = static_cast<int>(pr.heads_q / pr.heads_kv);
    p.seq_q = static_cast<int>(pr.seq_q);
    p.seq_k = static_cast<int>(pr.seq_k);
    p.head_dim = static_cast<int>(pr.head_dim);
    p.head_dim_v = static_cast<int>(pr.head_dim_v);
    p.scale = static_cast<float>(scale);
    p.softcap = static_cast<float>(softcap);
    p.window_left = pr.window_left;
    p.window_right = pr.window_right;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int batch = static_cast<int>(pr.batch);
    switch (q.scalar_type()) {
      case at::kFloat:
        return launch_for_dim<float>(p, batch, stream);
      case at::kBFloat16:
        return launch_for_dim<c10::BFloat16>(p, batch, stream);
      case at::kHalf:
        return launch_for_dim<c10::Half>(p, batch, stream);
      default:
        TORCH_CHECK(false, op, ": unsupported dtype ", q.scalar_type());
    }
  });
}

}  // namespace
}  // namespace flash_attn2_cuda

void attention_out_cuda(at::Tensor& out, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const std::optional<at::Tensor>& attn_mask,
                        double scale, bool causal, int64_t window_left, int64_t window_right,
                        double softcap) {
  flash_attn2_cuda::run(out, q, k, v, attn_mask, scale, causal, window_left, window_right,
                        softcap);
}

at::Tensor attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
                          int64_t window_left, int64_t window_right, double softcap) {
  at::Tensor out = flash_attn2::empty_output(q, v);
  flash_attn2_cuda::run(out, q, k, v, attn_mask, scale, causal, window_left, window_right,
                        softcap);
  return out;
}
