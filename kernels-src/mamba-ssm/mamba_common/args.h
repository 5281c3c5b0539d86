// The boundary between the op layer (torch-ext/ops_common.cpp: checks, dtype,
// allocation) and the loops of each backend (mamba_cpu, mamba_cuda). Only plain
// data crosses it, so the loops include no ATen header and the CPU copies that
// are compiled per instruction set share no tensor code.
//
// Strides are in elements. Every tensor's innermost dimension named below is
// contiguous unless a stride for it is given.
#pragma once

#include <cstdint>

namespace mamba_ssm {

// The dtypes the loops are compiled for; others run the PyTorch formula.
enum class DType { Float32, BFloat16 };

// Depthwise causal convolution over a sequence:
//   out[b, d, l] = act(bias[d] + sum_k w[k, d] * x[b, d, l - (K - 1) + k])
// with x = 0 before the start. `w` is [K, D] float (tap-major, so a run of
// channels is contiguous), `bias` [D] float or null.
struct ConvArgs {
  void* out;
  const void* x;
  const float* w;
  const float* bias;
  int64_t batch, dim, len, width;
  int64_t x_sb, x_sd, x_sl;
  int64_t o_sb, o_sd, o_sl;
  bool silu;
  DType dtype;
  // CPU: rows per work item of the channel-last loop compiled for widths 2-4
  // (0: one row per item, the general loop); set by the backend.
  int64_t row_block;
};

// One or more decode steps against a rolling conv state [B, D, S], S >= K - 1:
// the sequence seen is state ++ x, the outputs are its last `len` positions,
// and the state keeps its last S entries (updated in place). `w` is [D, K]
// float, the model's own layout, so a decode step copies no weight.
struct ConvUpdateArgs {
  void* out;
  const void* x;
  void* state;
  const float* w;
  const float* bias;
  int64_t batch, dim, len, width, state_len;
  int64_t x_sb, x_sd, x_sl;
  int64_t s_sb, s_sd, s_sl;
  int64_t o_sb, o_sd, o_sl;
  bool silu;
  DType dtype;
  // CPU: channels per work item of a one-token step with a compiled fixed shape
  // (0: one channel per item, any shape); set by the backend.
  int64_t channel_block;
};

// Mamba-2's scan (one head has a scalar decay A[h]; heads share B and C
// within a group of H / G heads). Per (b, h), with S [P, N] from `init` (or 0):
//   S = exp(dt A) S + dt x_t B_t^T;  y_t = S C_t + D x_t;  y_t *= silu(z_t)
// x [B, L, H, P], B and C [B, L, G, N], z like x or null, dt [B, L, H] float
// contiguous (bias, softplus and limits applied), A [H] float, D [H, P] float
// or null, init and final [B, H, P, N] float (contiguous; null when unused),
// y [B, L, H, P] contiguous.
struct ScanArgs {
  void* y;
  const void* x;
  const float* dt;
  const float* A;
  const void* B;
  const void* C;
  const float* D;
  const void* z;
  const float* init;
  float* final_state;
  float* workspace;  // GPU only: batch * heads * headdim * dstate floats (null on CPU)
  int64_t batch, len, heads, headdim, groups, dstate;
  int64_t chunk;       // the caller's chunk_size (>= 1); a backend may chunk finer
  int64_t head_block;  // CPU: heads of one group per work item (set by the backend)
  int64_t x_sb, x_sl, x_sh;
  int64_t B_sb, B_sl, B_sg;
  int64_t C_sb, C_sl, C_sg;
  int64_t z_sb, z_sl, z_sh;
  DType dtype;
};

// One decode step of Mamba-2 (selective_state_update) on the state
// [B, H, P, N] (last two dims contiguous), updated in place:
//   S = exp(dt A) S + dt x B^T;  out = S C + D x;  out *= silu(z)
// x and z [B, H, P], B and C [B, G, N], dt [B, H] float contiguous (bias and
// softplus applied), A [H] float, D [H, P] float or null, out [B, H, P]
// contiguous.
struct StepArgs {
  void* out;
  void* state;
  const void* x;
  const float* dt;
  const float* A;
  const void* B;
  const void* C;
  const float* D;
  const void* z;
  int64_t batch, heads, headdim, groups, dstate;
  int64_t s_sb, s_sh;
  int64_t x_sb, x_sh;
  int64_t B_sb, B_sg;
  int64_t C_sb, C_sg;
  int64_t z_sb, z_sh;
  DType dtype;
  bool state_fp32;  // state is float32 (else the dtype of x)
};

// Mamba-1's selective scan. Per (b, d), with s [N] from zero:
//   s = exp(delta A[d]) * s + delta u B_t;  y = s . C_t + D[d] u;  y *= silu(z)
// u and z [B, D, L] (l contiguous), delta [B, D, L] float contiguous (bias and
// softplus applied), A [D, N] float, B and C [B, G, N, L] (l contiguous; the
// D channels split into G groups), D [D] float or null, out [B, D, L]
// contiguous, last [B, D, N] float or null.
struct SelectiveScanArgs {
  void* out;
  const void* u;
  const float* delta;
  const float* A;
  const void* B;
  const void* C;
  const float* D;
  const void* z;
  float* last_state;
  float* workspace;  // GPU only: batch * dim * dstate floats (null on CPU)
  int64_t batch, dim, len, dstate, groups;
  int64_t u_sb, u_sd;
  int64_t B_sb, B_sg, B_sn;
  int64_t C_sb, C_sg, C_sn;
  int64_t z_sb, z_sd;
  DType dtype;
};

}  // namespace mamba_ssm
