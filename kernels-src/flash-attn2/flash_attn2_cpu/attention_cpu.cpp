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

// The best loops torch itself would use on this CPU (it honours the
// ATEN_CPU_CAPABILITY environment variable), limited to those compiled here.
const KernelTable* table_for(const std::string& capability) {
  const std::string torch_best = at::get_cpu_capability();
  const bool avx512_ok = torch_best == "AVX512";
  const bool avx2_ok = avx512_ok || torch_best == "AVX2";
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
  for (const char* capability : {"AVX512", "AVX2"}) {
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

// k as float32 [B, Hkv, D, Sk rounded up to kKeyPadding], zeros past Sk: the
// score loop then reads whole vectors of consecutive keys for one feature.
at::Tensor transposed_keys(const at::Tensor& k) {
  const int64_t seq_k = k.size(2);
  const int64_t padded = (seq_k + kKeyPadding - 1) / kKeyPadding * kKeyPadding;
  at::Tensor kt = at::empty({k.size(0), k.size(1), k.size(3), padded}, k.options().dtype(at::kFloat));
  kt.narrow(3, 0, seq_k).copy_(k.transpose(2, 3));
  if (padded > seq_k) {
    kt.narrow(3, seq_k, padded - seq_k).zero_();
  }
  return kt;
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
  // get float copies, k transposed, which the blocked loops amortise.
  const bool short_query = p.seq_q <= kDecodeMaxQuery;
  const at::Tensor qf = as_float_rows(q);
  const at::Tensor vf = short_query ? flash_attn2::rows_contiguous(v) : as_float_rows(v);
  const at::Tensor kr = short_query ? flash_attn2::rows_contiguous(k) : at::Tensor();
  const at::Tensor kt = short_query ? at::Tensor() : transposed_keys(k);
  flash_attn2::write_into(out, [&](at::Tensor& dst) {
    AttentionArgs args{};
    args.q = qf.const_data_ptr<float>();
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
    } else {
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
    const KernelTable* table = active_table().load();
    (short_query ? table->decode : table->attention)(args);
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
              "' loops are not available on this CPU/build; choose DEFAULT, AVX2 or AVX512 "
              "(at most what torch reports: ",
              at::get_cpu_capability(), ")");
  return flash_attn2_cpu::active_table().exchange(table)->capability;
}
