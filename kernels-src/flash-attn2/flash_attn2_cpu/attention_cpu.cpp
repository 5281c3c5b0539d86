// The CPU op: validate (attention_common), bring q/k/v to float32 in the
// layouts the loops read (k transposed and zero-padded), and hand plain
// pointers to the loops compiled for this CPU.
#include "../torch-ext/attention_common.h"
#include "../torch-ext/torch_binding.h"
#include "kernels.h"

#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>

namespace flash_attn2_cpu {
namespace {

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// The best loops torch itself would use on this CPU (it honours the
// ATEN_CPU_CAPABILITY environment variable), limited to those compiled here.
// AVX512_BF16 adds the CPU's own report of VDPBF16PS (torch has no level for it).
const KernelTable* table_for(const std::string& capability) {
  const std::string torch_best = at::get_cpu_capability();
  const bool avx512_ok = torch_best == "AVX512";
  const bool avx2_ok = avx512_ok || torch_best == "AVX2";
  if (capability == "AVX512_BF16") {
    return avx512_ok && cpu_has_avx512_bf16() ? kernel_table_AVX512_BF16() : nullptr;
  }
  if (capability == "AVX512") {
    return avx512_ok ? kernel_table_AVX512() : nullptr;
  }
  if (capability == "AVX2") {
    return avx2_ok ? kernel_table_AVX2() : nullptr;
  }
  if (capability == "DEFAULT") {
    return kernel_table_DEFAULT();
  }
  return nullptr;
}

const KernelTable* best_table() {
  for (const char* capability : {"AVX512_BF16", "AVX512", "AVX2"}) {
    if (const KernelTable* table = table_for(capability)) {
      return table;
    }
  }
  return kernel_table_DEFAULT();
}

std::atomic<const KernelTable*>& active_table() {
  static std::atomic<const KernelTable*> table{best_table()};
  return table;
}

// Sk rounded up to kKeyPadding: the packed keys' (and values') length.
int64_t padded_keys(int64_t seq_k) {
  return (seq_k + kKeyPadding - 1) / kKeyPadding * kKeyPadding;
}

// k as float32 [B, Hkv, D, Sk rounded up to kKeyPadding], zeros past Sk: the
// score loop then reads whole vectors of consecutive keys for one feature.
at::Tensor transposed_keys(const at::Tensor& k) {
  const int64_t seq_k = k.size(2);
  const int64_t padded = padded_keys(seq_k);
  at::Tensor kt = at::empty({k.size(0), k.size(1), k.size(3), padded}, k.options().dtype(at::kFloat));
  kt.narrow(3, 0, seq_k).copy_(k.transpose(2, 3));
  if (padded > seq_k) {
    kt.narrow(3, seq_k, padded - seq_k).zero_();
  }
  return kt;
}

// k as bf16 pairs of features, [B, Hkv, D / 2, padded, 2] (zeros past Sk): the
// score loop reads, for one pair of features, 16 consecutive keys per vector.
at::Tensor key_pairs(const at::Tensor& k, int64_t padded) {
  const int64_t seq_k = k.size(2);
  const int64_t d = k.size(3);
  at::Tensor packed = at::empty({k.size(0), k.size(1), d / 2, padded, 2}, k.options());
  packed.narrow(3, 0, seq_k).copy_(k.unflatten(3, {d / 2, 2}).transpose(2, 3));
  if (padded > seq_k) {
    packed.narrow(3, seq_k, padded - seq_k).zero_();
  }
  return packed;
}

// v as bf16 pairs of keys, [B, Hkv, padded / 2, Dv, 2] (zeros past Sk): P V
// reads, for one pair of keys, 16 consecutive value features per vector.
at::Tensor value_pairs(const at::Tensor& v, int64_t padded) {
  const int64_t seq_k = v.size(2);
  at::Tensor rows = at::empty({v.size(0), v.size(1), padded, v.size(3)}, v.options());
  rows.narrow(2, 0, seq_k).copy_(v);
  if (padded > seq_k) {
    rows.narrow(2, seq_k, padded - seq_k).zero_();
  }
  return rows.unflatten(2, {padded / 2, 2}).transpose(3, 4).contiguous();
}

at::Tensor as_float_rows(const at::Tensor& t) {
  return flash_attn2::rows_contiguous(t.to(at::kFloat));
}

void run(at::Tensor& out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
         const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
         int64_t window_left, int64_t window_right, double softcap) {
  constexpr const char* op = "flash_attn2.attention";
  const flash_attn2::Problem p = flash_attn2::prepare(
      op, q, k, v, attn_mask, scale, causal, window_left, window_right, softcap, &out);
  TORCH_CHECK(q.device().is_cpu(), op, ": the CPU op got tensors on ", q.device());
  if (out.numel() == 0) {
    return;
  }
  // Short queries read k and v as they are (see kDecodeMaxQuery); longer ones
  // get float copies, k transposed, which the blocked loops amortise, or, for
  // bf16 on loops with bf16 products, bf16 copies packed in pairs.
  const KernelTable* table = active_table().load();
  const bool short_query = p.seq_q <= kDecodeMaxQuery;
  const bool bf16_products = !short_query && table->attention_bf16 != nullptr &&
                             q.scalar_type() == at::kBFloat16 && p.head_dim % 2 == 0;
  const bool float_blocks = !short_query && !bf16_products;
  const at::Tensor qf = bf16_products ? flash_attn2::rows_contiguous(q) : as_float_rows(q);
  const at::Tensor vf = float_blocks ? as_float_rows(v) : flash_attn2::rows_contiguous(v);
  const at::Tensor kr = short_query ? flash_attn2::rows_contiguous(k) : at::Tensor();
  const at::Tensor kt = float_blocks ? transposed_keys(k) : at::Tensor();
  const int64_t padded = padded_keys(p.seq_k);
  const at::Tensor kp = bf16_products ? key_pairs(k, padded) : at::Tensor();
  const at::Tensor vp = bf16_products ? value_pairs(v, padded) : at::Tensor();
  flash_attn2::write_into(out, [&](at::Tensor& dst) {
    AttentionArgs args{};
    if (bf16_products) {
      args.q16 = qf.const_data_ptr<at::BFloat16>();
      args.k_pairs = kp.const_data_ptr<at::BFloat16>();
      args.v_pairs = vp.const_data_ptr<at::BFloat16>();
      args.sk_padded = padded;
    } else {
      args.q = qf.const_data_ptr<float>();
    }
    args.q_sb = qf.stride(0);
    args.q_sh = qf.stride(1);
    args.q_ss = qf.stride(2);
    if (short_query) {
      args.k_raw = kr.const_data_ptr();
      args.k_sb = kr.stride(0);
      args.k_sh = kr.stride(1);
      args.k_ss = kr.stride(2);
      args.v_raw = vf.const_data_ptr();
      args.kv_dtype = kr.scalar_type();
    } else if (float_blocks) {
      args.kt = kt.const_data_ptr<float>();
      args.sk_padded = kt.size(3);
      args.v = vf.const_data_ptr<float>();
    }
    args.v_sb = vf.stride(0);
    args.v_sh = vf.stride(1);
    args.v_ss = vf.stride(2);
    if (p.mask.defined()) {
      args.mask = p.mask.const_data_ptr<float>();
      args.m_sb = p.mask.stride(0);
      args.m_sh = p.mask.stride(1);
      args.m_ss = p.mask.stride(2);
    }
    args.out = dst.data_ptr();
    args.o_sb = dst.stride(0);
    args.o_sh = dst.stride(1);
    args.o_ss = dst.stride(2);
    args.out_dtype = dst.scalar_type();
    args.batch = p.batch;
    args.heads_q = p.heads_q;
    args.heads_kv = p.heads_kv;
    args.seq_q = p.seq_q;
    args.seq_k = p.seq_k;
    args.head_dim = p.head_dim;
    args.head_dim_v = p.head_dim_v;
    args.scale = static_cast<float>(scale);
    args.softcap = static_cast<float>(softcap);
    args.window_left = p.window_left;
    args.window_right = p.window_right;
    (short_query ? table->decode : bf16_products ? table->attention_bf16 : table->attention)(args);
  });
}

}  // namespace
}  // namespace flash_attn2_cpu

void attention_out_cpu(at::Tensor& out, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v, const std::optional<at::Tensor>& attn_mask,
                       double scale, bool causal, int64_t window_left, int64_t window_right,
                       double softcap) {
  flash_attn2_cpu::run(out, q, k, v, attn_mask, scale, causal, window_left, window_right,
                       softcap);
}

at::Tensor attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
                         int64_t window_left, int64_t window_right, double softcap) {
  at::Tensor out = flash_attn2::empty_output(q, v);
  flash_attn2_cpu::run(out, q, k, v, attn_mask, scale, causal, window_left, window_right,
                       softcap);
  return out;
}

std::string cpu_capability() {
  return flash_attn2_cpu::active_table().load()->capability;
}

std::string set_cpu_capability(const std::string& capability) {
  const flash_attn2_cpu::KernelTable* table = flash_attn2_cpu::table_for(capability);
  TORCH_CHECK(table != nullptr, "set_cpu_capability: '", capability,
              "' loops are not available on this CPU/build; choose DEFAULT, AVX2, AVX512 or "
              "AVX512_BF16 "
              "(at most what torch reports: ",
              at::get_cpu_capability(), "; AVX512_BF16 also needs the CPU's avx512_bf16)");
  return flash_attn2_cpu::active_table().exchange(table)->capability;
}
