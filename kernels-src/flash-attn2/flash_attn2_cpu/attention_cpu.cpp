// The CPU op: validate (attention_common), bring q/k/v to float32 in the
// layouts the loops read (k transposed and zero-padded), and hand plain
// pointers to the loops compiled for this CPU.
#include "../torch-ext/attention_common.h"
#include "../torch-ext/torch_binding.h"
#include "dispatch.h"
#include "kernels.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Version.h>
#include <ATen/native/CPUBlas.h>
#include <c10/util/Exception.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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
// Whether ATen's bf16 brgemm runs here on packed ("VNNI") operands: it needs
// oneDNN's ukernels in this torch build. Asked once, with one tiny product
// checked against its known result.
bool brgemm_bf16_works() {
  static const bool works = [] {
    try {
      // A [1 x 32] all ones; B [32 x 32] packed in pairs, column j = (j % 8, 1, j % 8,
      // 1, ...): C[j] = 16 (j % 8) + 16, exact in bf16 and float.
      constexpr int kN = 32;
      constexpr int kK = 32;
      std::vector<at::BFloat16> a(kK, at::BFloat16(1.0f));
      std::vector<at::BFloat16> b(kK * kN);
      for (int p = 0; p < kK / 2; ++p) {
        for (int j = 0; j < kN; ++j) {
          b[(p * kN + j) * 2] = at::BFloat16(static_cast<float>(j % 8));
          b[(p * kN + j) * 2 + 1] = at::BFloat16(1.0f);
        }
      }
      std::vector<float> c(kN, -1.0f);
      at::native::cpublas::brgemm(1, kN, kK, kK, kN, kN, false, a.data(), b.data(), c.data(),
                                  true);
      at::native::cpublas::brgemm_release(true);
      for (int j = 0; j < kN; ++j) {
        if (c[j] != static_cast<float>(16 * (j % 8) + 16)) {
          return false;
        }
      }
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }();
  return works;
}

// AVX512_BF16 adds the CPU's own report of VDPBF16PS (torch has no level for
// it); BRGEMM_BF16 that and oneDNN's brgemm (the AMX tiles where present).
const KernelTable* table_for(const std::string& capability) {
  const std::string torch_best = at::get_cpu_capability();
  const bool avx512_ok = torch_best == "AVX512";
  const bool avx2_ok = avx512_ok || torch_best == "AVX2";
  const bool bf16_ok = avx512_ok && cpu_has_avx512_bf16();
  if (capability == "BRGEMM_BF16") {
    return bf16_ok && brgemm_bf16_works() ? kernel_table_BRGEMM_BF16() : nullptr;
  }
  if (capability == "AVX512_BF16") {
    return bf16_ok ? kernel_table_AVX512_BF16() : nullptr;
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

// With AMX (oneDNN packs bf16 for it), its tiles are the fastest bf16 products;
// without, our VDPBF16PS loops.
const KernelTable* best_table() {
  if (at::native::cpublas::could_pack(at::kBFloat16)) {
    if (const KernelTable* table = table_for("BRGEMM_BF16")) {
      return table;
    }
  }
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

// The blocked loops' K and V operands. Written by plain loops, both in one
// parallel region (one (batch, KV head) per task): a strided tensor copy with an
// innermost dimension of 2 would cost more than the attention for short
// sequences, and every parallel region costs a wake-up of the thread pool.
struct PackedKV {
  at::Tensor kt;        // float: k as float32 [B, Hkv, D, padded to kKeyPadding], zeros past Sk
  at::Tensor v;         // float: v with float32 rows (v itself when it is float32)
  at::Tensor k_pairs;   // bf16: [B, Hkv, padded / kKeyBlock, D / 2, kKeyBlock, 2]
  at::Tensor v_pairs;   // bf16: [B, Hkv, padded / 2, Dv, 2]
  int64_t padded = 0;   // keys per head in kt / the pairs
};

template <typename T>
void transpose_head(const T* head, int64_t stride, int64_t seq_k, int64_t d, int64_t padded,
                    float* out) {
  // 16 keys at a time, so each row of the output is written 64 bytes at a time.
  constexpr int64_t kStep = 16;
  for (int64_t j0 = 0; j0 < padded; j0 += kStep) {
    const int64_t keys = std::max<int64_t>(0, std::min(kStep, seq_k - j0));
    for (int64_t f = 0; f < d; ++f) {
      float* column = out + f * padded + j0;
      for (int64_t j = 0; j < keys; ++j) {
        column[j] = static_cast<float>(head[(j0 + j) * stride + f]);
      }
      std::fill(column + keys, column + std::min(kStep, padded - j0), 0.0f);
    }
  }
}

// word (block, p, j) of k's pairs = features (2p, 2p + 1) of key block * kKeyBlock + j.
void key_pairs_head(const at::BFloat16* head, int64_t stride, int64_t seq_k, int64_t pairs,
                    int64_t padded, uint32_t* out) {
  for (int64_t j = 0; j < padded; ++j) {
    uint32_t* column = out + j / kKeyBlock * pairs * kKeyBlock + j % kKeyBlock;
    const at::BFloat16* key = j < seq_k ? head + j * stride : nullptr;
    for (int64_t p = 0; p < pairs; ++p) {
      uint32_t word = 0;
      if (key != nullptr) {
        std::memcpy(&word, key + 2 * p, sizeof(word));
      }
      column[p * kKeyBlock] = word;
    }
  }
}

// word (i, n) of v's pairs = feature n of keys 2i and 2i + 1.
void value_pairs_head(const at::BFloat16* head, int64_t stride, int64_t seq_k, int64_t dv,
                      int64_t padded, at::BFloat16* out) {
  const at::BFloat16 zero(0.0f);
  for (int64_t i = 0; i < padded / 2; ++i) {
    const int64_t j = 2 * i;
    const at::BFloat16* even = j < seq_k ? head + j * stride : nullptr;
    const at::BFloat16* odd = j + 1 < seq_k ? head + (j + 1) * stride : nullptr;
    at::BFloat16* row = out + i * 2 * dv;
    for (int64_t n = 0; n < dv; ++n) {
      row[2 * n] = even != nullptr ? even[n] : zero;
      row[2 * n + 1] = odd != nullptr ? odd[n] : zero;
    }
  }
}

// k and v ([B, Hkv, Sk, D(v)], last stride 1) in the layout the blocked loops read.
PackedKV pack_kv(const at::Tensor& k, const at::Tensor& v, bool bf16_products) {
  PackedKV packed;
  const int64_t seq_k = k.size(2);
  const int64_t d = k.size(3);
  const int64_t dv = v.size(3);
  if (bf16_products) {
    packed.padded = (seq_k + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
    packed.k_pairs = at::empty({k.size(0), k.size(1), packed.padded * d}, k.options());
    packed.v_pairs = at::empty({v.size(0), v.size(1), packed.padded * dv}, v.options());
  } else {
    packed.padded = (seq_k + kKeyPadding - 1) / kKeyPadding * kKeyPadding;
    packed.kt = at::empty({k.size(0), k.size(1), d, packed.padded}, k.options().dtype(at::kFloat));
    packed.v = v.scalar_type() == at::kFloat ? v : at::empty(v.sizes(), v.options().dtype(at::kFloat));
  }
  const int64_t heads = k.size(1);
  at::parallel_for(0, k.size(0) * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / heads;
      const int64_t h = task % heads;
      const int64_t k_at = b * k.stride(0) + h * k.stride(1);
      const int64_t v_at = b * v.stride(0) + h * v.stride(1);
      if (bf16_products) {
        key_pairs_head(k.const_data_ptr<at::BFloat16>() + k_at, k.stride(2), seq_k, d / 2,
                       packed.padded,
                       reinterpret_cast<uint32_t*>(packed.k_pairs.data_ptr<at::BFloat16>() +
                                                   task * packed.padded * d));
        value_pairs_head(v.const_data_ptr<at::BFloat16>() + v_at, v.stride(2), seq_k, dv,
                         packed.padded,
                         packed.v_pairs.data_ptr<at::BFloat16>() + task * packed.padded * dv);
        continue;
      }
      float* kt = packed.kt.data_ptr<float>() + task * d * packed.padded;
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, k.scalar_type(), "pack_kv", [&] {
        transpose_head(k.const_data_ptr<scalar_t>() + k_at, k.stride(2), seq_k, d,
                       packed.padded, kt);
        if (!packed.v.is_same(v)) {
          const scalar_t* src = v.const_data_ptr<scalar_t>() + v_at;
          float* dst = packed.v.data_ptr<float>() + b * packed.v.stride(0) + h * packed.v.stride(1);
          for (int64_t j = 0; j < seq_k; ++j) {
            for (int64_t n = 0; n < dv; ++n) {
              dst[j * packed.v.stride(2) + n] = static_cast<float>(src[j * v.stride(2) + n]);
            }
          }
        }
      });
    }
  });
  return packed;
}

at::Tensor as_float_rows(const at::Tensor& t) {
  return flash_attn2::rows_contiguous(t.to(at::kFloat));
}

// The attention by this kernel's loops (`table`), into `out`.
void run_loops(at::Tensor& out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const flash_attn2::Problem& p, double scale, double softcap,
               const KernelTable* table) {
  // Short queries read k and v as they are (see kDecodeMaxQuery); longer ones
  // get float copies, k transposed, which the blocked loops amortise, or, for
  // bf16 on loops with bf16 products, bf16 copies packed in pairs (pack_kv).
  const bool short_query = p.seq_q <= kDecodeMaxQuery;
  const bool bf16_products = !short_query && table->attention_bf16 != nullptr &&
                             q.scalar_type() == at::kBFloat16 && p.head_dim % 2 == 0;
  const bool float_blocks = !short_query && !bf16_products;
  // The blocked loops read q in its own dtype (each task packs its rows); the
  // decode path reads float rows.
  const at::Tensor qf = short_query ? as_float_rows(q) : flash_attn2::rows_contiguous(q);
  const at::Tensor kr = flash_attn2::rows_contiguous(k);
  const at::Tensor vr = flash_attn2::rows_contiguous(v);
  const PackedKV packed = short_query ? PackedKV{} : pack_kv(kr, vr, bf16_products);
  const at::Tensor& vf = float_blocks ? packed.v : vr;
  flash_attn2::write_into(out, [&](at::Tensor& dst) {
    AttentionArgs args{};
    if (short_query) {
      args.q = qf.const_data_ptr<float>();
    } else {
      args.q_raw = qf.const_data_ptr();
      args.q_dtype = qf.scalar_type();
    }
    if (bf16_products) {
      args.k_pairs = packed.k_pairs.const_data_ptr<at::BFloat16>();
      args.v_pairs = packed.v_pairs.const_data_ptr<at::BFloat16>();
      args.sk_padded = packed.padded;
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
      args.kt = packed.kt.const_data_ptr<float>();
      args.sk_padded = packed.padded;
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

// Into `*out` when given, else into a fresh output or sdpa's own (run_faster).
at::Tensor run(at::Tensor* out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
               int64_t window_left, int64_t window_right, double softcap) {
  constexpr const char* op = "flash_attn2.attention";
  const flash_attn2::Problem p = flash_attn2::prepare(
      op, q, k, v, attn_mask, scale, causal, window_left, window_right, softcap, out);
  TORCH_CHECK(q.device().is_cpu(), op, ": the CPU op got tensors on ", q.device());
  if (p.batch * p.heads_q * p.seq_q * p.head_dim_v == 0) {
    return out != nullptr ? *out : flash_attn2::empty_output(q, v);
  }
  const KernelTable* table = active_table().load();
  const Request request{scale, softcap, causal, p.mask.defined()};
  return run_faster(out, q, k, v, p, request, table->capability, [&](at::Tensor& dst) {
    run_loops(dst, q, k, v, p, scale, softcap, table);
  });
}

}  // namespace
}  // namespace flash_attn2_cpu

void attention_out_cpu(at::Tensor& out, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v, const std::optional<at::Tensor>& attn_mask,
                       double scale, bool causal, int64_t window_left, int64_t window_right,
                       double softcap) {
  flash_attn2_cpu::run(&out, q, k, v, attn_mask, scale, causal, window_left, window_right,
                       softcap);
}

at::Tensor attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& attn_mask, double scale, bool causal,
                         int64_t window_left, int64_t window_right, double softcap) {
  return flash_attn2_cpu::run(nullptr, q, k, v, attn_mask, scale, causal, window_left,
                              window_right, softcap);
}

std::string cpu_capability() {
  return flash_attn2_cpu::active_table().load()->capability;
}

std::string set_attention_dispatch(const std::string& mode) {
  return flash_attn2_cpu::set_dispatch(mode);
}

std::vector<std::string> attention_dispatch_decisions() {
  return flash_attn2_cpu::dispatch_decisions();
}

std::string set_cpu_capability(const std::string& capability) {
  const flash_attn2_cpu::KernelTable* table = flash_attn2_cpu::table_for(capability);
  TORCH_CHECK(table != nullptr, "set_cpu_capability: '", capability,
              "' loops are not available on this CPU/build; choose DEFAULT, AVX2, AVX512, "
              "AVX512_BF16 or BRGEMM_BF16 "
              "(at most what torch reports: ",
              at::get_cpu_capability(), "; AVX512_BF16 and BRGEMM_BF16 also need the CPU's "
              "avx512_bf16, BRGEMM_BF16 oneDNN's ukernels in torch)");
  return flash_attn2_cpu::active_table().exchange(table)->capability;
}
