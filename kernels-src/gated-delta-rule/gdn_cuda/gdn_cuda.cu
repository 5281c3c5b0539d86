// The CUDA ops: one block per (batch, value head), one thread per state
// column. A thread keeps its column of S (Dk floats) and applies the gated
// delta rule token by token; q and k of the token are staged in shared memory
// and normalised by every thread alike. The chunked op runs the same
// recurrence (identical results up to float rounding; the chunked form's
// matrix products are a later tensor-core kernel).
#include "../torch-ext/gdn_common.h"
#include "../torch-ext/torch_binding.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>

namespace gdn_cuda {
namespace {

constexpr int kMaxDk = 256;

struct Args {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  float* state;
  void* out;
  int64_t seq, hk, hv, dk, dv;
  int64_t qs0, qs1, qs2, ks0, ks1, ks2, vs0, vs1, vs2;
  float scale;
  bool l2norm;
};

template <typename T>
__global__ void recurrent_kernel(Args a) {
  extern __shared__ float shared[];
  float* q = shared;
  float* k = shared + a.dk;
  __shared__ float norms[2];
  const int64_t task = blockIdx.x;
  const int64_t b = task / a.hv, h = task % a.hv, hk = h / (a.hv / a.hk);
  float* S = a.state + task * a.dk * a.dv;
  const T* qb = static_cast<const T*>(a.q) + b * a.qs0 + hk * a.qs2;
  const T* kb = static_cast<const T*>(a.k) + b * a.ks0 + hk * a.ks2;
  const T* vb = static_cast<const T*>(a.v) + b * a.vs0 + h * a.vs2;
  T* ob = static_cast<T*>(a.out) + (b * a.seq * a.hv + h) * a.dv;
  for (int64_t c0 = 0; c0 < a.dv; c0 += blockDim.x) {
    const int64_t c = c0 + threadIdx.x;
    const bool active = c < a.dv;
    float s[kMaxDk];
    for (int64_t d = 0; d < a.dk; ++d) {
      s[d] = active ? S[d * a.dv + c] : 0.f;
    }
    for (int64_t t = 0; t < a.seq; ++t) {
      __syncthreads();
      for (int64_t d = threadIdx.x; d < a.dk; d += blockDim.x) {
        q[d] = static_cast<float>(qb[t * a.qs1 + d]);
        k[d] = static_cast<float>(kb[t * a.ks1 + d]);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        float qq = 0.f, kk = 0.f;
        for (int64_t d = 0; d < a.dk; ++d) {
          qq += q[d] * q[d];
          kk += k[d] * k[d];
        }
        norms[0] = a.scale * (a.l2norm ? rsqrtf(qq + 1e-6f) : 1.f);
        norms[1] = a.l2norm ? rsqrtf(kk + 1e-6f) : 1.f;
      }
      __syncthreads();
      const int64_t gi = (b * a.seq + t) * a.hv + h;
      const float decay = expf(a.g[gi]);
      const float beta = a.beta[gi];
      const float qn = norms[0], kn = norms[1];
      float kv = 0.f;
      for (int64_t d = 0; d < a.dk; ++d) {
        s[d] *= decay;
        kv += s[d] * k[d] * kn;
      }
      const float v = active ? static_cast<float>(vb[t * a.vs1 + c]) : 0.f;
      const float delta = beta * (v - kv);
      float o = 0.f;
      for (int64_t d = 0; d < a.dk; ++d) {
        s[d] += k[d] * kn * delta;
        o += s[d] * q[d] * qn;
      }
      if (active) {
        ob[t * a.hv * a.dv + c] = static_cast<T>(o);
      }
    }
    if (active) {
      for (int64_t d = 0; d < a.dk; ++d) {
        S[d * a.dv + c] = s[d];
      }
    }
  }
}

std::tuple<at::Tensor, at::Tensor> run(const char* op, const at::Tensor& q_in,
                                       const at::Tensor& k_in, const at::Tensor& v_in,
                                       const at::Tensor& g_in, const at::Tensor& beta_in,
                                       double scale, const std::optional<at::Tensor>& initial_state,
                                       bool l2norm) {
  const gdn_common::Shape s = gdn_common::check(op, q_in, k_in, v_in, g_in, beta_in, initial_state);
  TORCH_CHECK_VALUE(q_in.is_cuda(), op, ": expected CUDA tensors, got ", q_in.device());
  TORCH_CHECK_VALUE(s.dk <= kMaxDk, op, ": key head dim must be at most ", kMaxDk, ", got ", s.dk);
  const c10::cuda::CUDAGuard guard(q_in.device());
  const at::Tensor q = q_in.stride(3) == 1 ? q_in : q_in.contiguous();
  const at::Tensor k = k_in.stride(3) == 1 ? k_in : k_in.contiguous();
  const at::Tensor v = v_in.stride(3) == 1 ? v_in : v_in.contiguous();
  const at::Tensor g = g_in.to(at::kFloat).contiguous();
  const at::Tensor beta = beta_in.to(at::kFloat).contiguous();
  at::Tensor state = gdn_common::start_state(s, initial_state, q.options());
  at::Tensor out = at::empty({s.batch, s.seq, s.hv, s.dv}, v.options());
  if (s.batch * s.hv == 0 || s.seq == 0) {
    return {out, state};
  }
  Args a{q.const_data_ptr(), k.const_data_ptr(), v.const_data_ptr(), g.const_data_ptr<float>(),
         beta.const_data_ptr<float>(), state.data_ptr<float>(), out.data_ptr(),
         s.seq, s.hk, s.hv, s.dk, s.dv,
         q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
         v.stride(0), v.stride(1), v.stride(2), static_cast<float>(scale), l2norm};
  const int threads = static_cast<int>(s.dv < 128 ? ((s.dv + 31) / 32) * 32 : 128);
  const size_t smem = 2 * s.dk * sizeof(float);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const unsigned blocks = static_cast<unsigned>(s.batch * s.hv);
  switch (q.scalar_type()) {
    case at::kBFloat16:
      recurrent_kernel<c10::BFloat16><<<blocks, threads, smem, stream>>>(a);
      break;
    case at::kHalf:
      recurrent_kernel<c10::Half><<<blocks, threads, smem, stream>>>(a);
      break;
    default:
      recurrent_kernel<float><<<blocks, threads, smem, stream>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, state};
}

}  // namespace
}  // namespace gdn_cuda

std::tuple<at::Tensor, at::Tensor> chunk_gated_delta_rule_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, double scale, const std::optional<at::Tensor>& initial_state,
    bool use_qk_l2norm, int64_t chunk_size) {
  TORCH_CHECK_VALUE(chunk_size >= 1 && chunk_size <= 256,
                    "chunk_gated_delta_rule: chunk_size must be in [1, 256], got ", chunk_size);
  return gdn_cuda::run("chunk_gated_delta_rule", q, k, v, g, beta, scale, initial_state,
                       use_qk_l2norm);
}

std::tuple<at::Tensor, at::Tensor> recurrent_gated_delta_rule_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, double scale, const std::optional<at::Tensor>& initial_state,
    bool use_qk_l2norm) {
  return gdn_cuda::run("fused_recurrent_gated_delta_rule", q, k, v, g, beta, scale,
                       initial_state, use_qk_l2norm);
}
