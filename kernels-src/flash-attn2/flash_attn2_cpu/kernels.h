// The boundary between the CPU op layer (attention_cpu.cpp: validation,
// packing, CPU dispatch) and the blocked attention loops (kernels_impl.h),
// compiled once per CPU capability (kernels_{default,avx2,avx512}.cpp). Only
// plain data crosses it, so the capability-specific objects share no tensor code.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>

#include <cstdint>

namespace flash_attn2_cpu {

// One attention problem, already validated and brought to float32:
//   out[b, h, i, :] = softmax_j(score(i, j)) @ v[b, h / group, j, :]
//   score(i, j) = softcap(scale * q[b, h, i, :] . k[b, h / group, j, :]) + mask[b, h, i, j]
// over the keys j in [lo(i), hi(i)) (causal / sliding window), where
// group = heads_q / heads_kv. Rows with no visible key (or only -inf scores)
// are written as zeros, as FlashAttention does.
struct AttentionArgs {
  // q: [B, Hq, Sq, D] with the given strides (last stride 1): in float32 for
  // the decode path (`q`), in its own dtype for the blocked paths (`q_raw`,
  // q_dtype), which gather each task's rows into a packed buffer.
  const float* q;
  const void* q_raw;
  c10::ScalarType q_dtype;
  int64_t q_sb, q_sh, q_ss;
  // k transposed and packed: float32, contiguous [B, Hkv, D, sk_padded]; the
  // columns past Sk are zeros, so the score loops need no column tails.
  const float* kt;
  int64_t sk_padded;
  // v: float32, [B, Hkv, Sk, Dv] with the given strides (last stride 1).
  const float* v;
  int64_t v_sb, v_sh, v_ss;
  // Additive float32 mask, broadcast to [B, Hq, Sq, Sk] (strides may be 0,
  // last stride 1), or nullptr.
  const float* mask;
  int64_t m_sb, m_sh, m_ss;
  // out: [B, Hq, Sq, Dv] with the given strides (last stride 1), in out_dtype
  // (float32, bfloat16 or float16).
  void* out;
  int64_t o_sb, o_sh, o_ss;
  c10::ScalarType out_dtype;

  // Short queries only (seq_q <= kDecodeMaxQuery, the decode path): k and v
  // in their own dtype (kv_dtype: float32, bfloat16 or float16), [B, Hkv, Sk,
  // D] with the given strides (last stride 1); kt and v above are unused.
  const void* k_raw;
  int64_t k_sb, k_sh, k_ss;
  const void* v_raw;
  c10::ScalarType kv_dtype;

  // The bfloat16-product loops only (KernelTable::attention_bf16; head_dim
  // even, q_dtype bfloat16): k packed in feature pairs
  // and blocks of kKeyBlock keys, contiguous [B, Hkv, sk_padded / kKeyBlock,
  // D / 2, kKeyBlock, 2]; v packed in key pairs, contiguous [B, Hkv,
  // sk_padded / 2, Dv, 2]; both zeros past Sk, sk_padded a multiple of
  // kKeyBlock. One 32-bit word then holds the two bf16 factors that one float
  // lane accumulates (VDPBF16PS, AMX TDPBF16PS: the "VNNI" layout oneDNN's
  // brgemm reads). kt and v above are unused.
  const c10::BFloat16* k_pairs;
  const c10::BFloat16* v_pairs;

  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim_v;
  float scale;
  float softcap;         // <= 0: off
  int64_t window_left;   // < 0: unbounded
  int64_t window_right;  // < 0: unbounded (causal sets 0)
};

// The width, in floats, that sk_padded must be a multiple of: the widest
// column step of any compiled copy of the loops.
constexpr int64_t kKeyPadding = 64;

// Queries of at most this many rows (a decode step, a short speculative chunk)
// take the decode path: k and v are read once, in their own dtype, by every
// query head of a KV group together, instead of being converted to float and
// transposed first (which for one query costs more than the attention).
constexpr int64_t kDecodeMaxQuery = 4;

// Keys per softmax step of the blocked loops (and per packed block of k_pairs).
constexpr int64_t kKeyBlock = 256;

// One set of loops, compiled for one CPU capability.
struct KernelTable {
  const char* capability;
  void (*attention)(const AttentionArgs&);
  void (*decode)(const AttentionArgs&);
  // bfloat16 inputs multiplied in bfloat16 (float accumulation), or nullptr
  // where this copy of the loops has no such instructions.
  void (*attention_bf16)(const AttentionArgs&);
};

// Defined by kernels_<capability>.cpp. A capability the compiler or target
// cannot build returns nullptr (e.g. AVX2/AVX-512 tables on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();
const KernelTable* kernel_table_AVX512_BF16();
// bfloat16 products by oneDNN's brgemm ukernels through ATen (AMX tiles where the
// CPU has them); the rest as AVX512_BF16. nullptr where that copy is not built.
const KernelTable* kernel_table_BRGEMM_BF16();

}  // namespace flash_attn2_cpu
