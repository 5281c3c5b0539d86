// CPU ops of the moe kernel: fused experts and the top-k router.
//
// Experts: the (token, slot) pairs are counting-sorted by expert once, their rows
// gathered into one contiguous block, each expert's rows multiplied by its
// gate/up and down weights — with ATen's GEMMs (oneDNN/MKL: AVX-512, AVX-512-BF16,
// AMX where the CPU has it) where experts get many rows, and with the few-rows
// kernel below (all experts in one parallel region) where none gets more than 32 —
// the gated activation applied to the whole block in two vectorised passes, and each token's output summed from its slots in
// float32 in slot order, weights applied on the way (the weighted scatter). The
// PyTorch paths Transformers runs instead sort with torch.sort, gather, permute
// back and reduce as separate tensor ops, or loop over experts with one_hot
// masks and index_add_; this path allocates three scratch blocks and touches
// each once.
#include "../torch-ext/torch_binding.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

namespace {

// The weighted scatter: out[t] = sum_k w[t, k] * y[pos[t, k]] in float32, slots
// in order (so results do not depend on how experts were batched). Compiled for
// AVX-512, AVX2 and baseline x86-64; the loader picks the copy the CPU runs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MOE_CLONES
#endif

MOE_CLONES void accumulate_f32(float* acc, const float* y, float w, int64_t h) {
  for (int64_t i = 0; i < h; ++i) acc[i] += w * y[i];
}

MOE_CLONES void accumulate_bf16(float* acc, const c10::BFloat16* y, float w, int64_t h) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(y);
  for (int64_t i = 0; i < h; ++i) {
    uint32_t u = static_cast<uint32_t>(bits[i]) << 16;
    float v;
    std::memcpy(&v, &u, sizeof v);
    acc[i] += w * v;
  }
}

MOE_CLONES void store_bf16(c10::BFloat16* out, const float* acc, int64_t h) {
  // Round to nearest even, as torch's float -> bfloat16 conversion does (the
  // inputs are finite sums of finite products; NaN keeps a quiet payload).
  uint16_t* bits = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < h; ++i) {
    uint32_t u;
    std::memcpy(&u, &acc[i], sizeof u);
    uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    bits[i] = std::isnan(acc[i]) ? static_cast<uint16_t>((u >> 16) | 0x40u)
                                 : static_cast<uint16_t>(rounded >> 16);
  }
}

// Few rows per expert (a decode token, or the handful of rows each expert gets when many
// experts share a short prefill): y[r, o] = sum_h x[r, h] w_e[o, h] with x in float32,
// each weight row read once for up to kSmallRows rows, bfloat16 weights widened in
// registers, FMAs in float32. All experts' (expert, output block) pieces run in one
// parallel region: a GEMM call per expert would open one region per expert (and, for
// bfloat16 on a CPU without AVX-512-BF16, ATen widens the weights through memory).
// AVX2 + FMA; the caller checks the CPU.
constexpr int64_t kSmallRows = 8;
constexpr int64_t kSmallMaxRows = 32;
constexpr int64_t kOutBlock = 64;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOE_HAVE_SMALL_GEMM 1

__attribute__((target("avx2,fma"))) inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
__attribute__((target("avx2,fma"))) inline __m256 load8(const uint16_t* p) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
}
inline float widen(float v) { return v; }
inline float widen(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename W, int N>
__attribute__((target("avx2,fma"))) void small_gemm_rows(const float* x, int64_t h, const W* w,
                                                          float* y, int64_t ldy, int64_t o0,
                                                          int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const W* wr = w + o * h;
    __m256 acc[N];
    for (int r = 0; r < N; ++r) acc[r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= h; i += 8) {
      __m256 wv = load8(wr + i);
      for (int r = 0; r < N; ++r)
        acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * h + i), acc[r]);
    }
    for (int r = 0; r < N; ++r) {
      __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
      __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
      float sum = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
      for (int64_t j = i; j < h; ++j) sum += widen(wr[j]) * x[r * h + j];
      y[r * ldy + o] = sum;
    }
  }
}

// One row (a decode token's slot): the loop above would run one FMA chain per output,
// waiting out each FMA's latency, and stream one weight row at a time. Eight outputs at
// once keep eight chains and eight weight streams in flight (measured with fp32 weights
// at Qwen3-MoE's decode shapes: the one-chain loop was 0.77x ATen's matrix-vector
// product; see README). Each output is summed in the same order as in the loop above,
// so a token's result does not depend on how many rows its expert got.
template <typename W>
__attribute__((target("avx2,fma"))) void small_gemm_one_row(const float* x, int64_t h,
                                                             const W* w, float* y,
                                                             int64_t ldy, int64_t o0,
                                                             int64_t o1) {
  constexpr int kOuts = 8;
  int64_t o = o0;
  for (; o + kOuts <= o1; o += kOuts) {
    const W* wr = w + o * h;
    __m256 acc[kOuts];
    for (int j = 0; j < kOuts; ++j) acc[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= h; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
      for (int j = 0; j < kOuts; ++j)
        acc[j] = _mm256_fmadd_ps(load8(wr + j * h + i), xv, acc[j]);
    }
    for (int j = 0; j < kOuts; ++j) {
      __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
      __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
      float sum = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
      for (int64_t t = i; t < h; ++t) sum += widen(wr[j * h + t]) * x[t];
      y[o + j] = sum;
    }
  }
  if (o < o1) small_gemm_rows<W, 1>(x, h, w, y, ldy, o, o1);
}

template <typename W>
using SmallGemm = void (*)(const float*, int64_t, const W*, float*, int64_t, int64_t, int64_t);
template <typename W>
constexpr SmallGemm<W> kSmallGemm[kSmallRows] = {
    small_gemm_one_row<W>, small_gemm_rows<W, 2>, small_gemm_rows<W, 3>, small_gemm_rows<W, 4>,
    small_gemm_rows<W, 5>, small_gemm_rows<W, 6>, small_gemm_rows<W, 7>, small_gemm_rows<W, 8>};

bool small_gemm_usable() {
  static const bool usable = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return usable;
}

// y [rows, O] (float32) = each expert's rows of x [rows, H] (float32) times w_e^T, where
// w is [E, O, H] (contiguous) and expert e owns rows count[e] .. count[e + 1].
template <typename W>
void grouped_small_gemm(const float* x, int64_t h, const W* w, int64_t out_dim,
                        const std::vector<int64_t>& count, float* y) {
  std::vector<int64_t> active;
  for (size_t e = 0; e + 1 < count.size(); ++e)
    if (count[e + 1] > count[e]) active.push_back(static_cast<int64_t>(e));
  const int64_t blocks = (out_dim + kOutBlock - 1) / kOutBlock;
  const int64_t items = static_cast<int64_t>(active.size()) * blocks;
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t e = active[item / blocks];
      const int64_t o0 = (item % blocks) * kOutBlock, o1 = std::min(out_dim, o0 + kOutBlock);
      for (int64_t r0 = count[e]; r0 < count[e + 1]; r0 += kSmallRows) {
        const int64_t rows = std::min(kSmallRows, count[e + 1] - r0);
        kSmallGemm<W>[rows - 1](x + r0 * h, h, w + e * out_dim * h, y + r0 * out_dim,
                                out_dim, o0, o1);
      }
    }
  });
}
#else
#define MOE_HAVE_SMALL_GEMM 0
bool small_gemm_usable() { return false; }
#endif

void check_experts_args(const at::Tensor& hidden, const at::Tensor& index,
                        const at::Tensor& weights, const at::Tensor& gate_up,
                        const at::Tensor& down) {
  TORCH_CHECK(hidden.dim() == 2, "moe_experts: hidden must be [tokens, hidden], got ",
              hidden.sizes());
  TORCH_CHECK(index.dim() == 2 && index.size(0) == hidden.size(0),
              "moe_experts: top_k_index must be [tokens, k] with hidden's tokens, got ",
              index.sizes());
  TORCH_CHECK(weights.sizes() == index.sizes(),
              "moe_experts: top_k_weights must have top_k_index's shape ", index.sizes(),
              ", got ", weights.sizes());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "moe_experts: top_k_index must be int64 or int32, got ", index.scalar_type());
  TORCH_CHECK(gate_up.dim() == 3 && gate_up.size(2) == hidden.size(1) &&
                  gate_up.size(1) % 2 == 0,
              "moe_experts: gate_up must be [experts, 2 * intermediate, hidden=",
              hidden.size(1), "], got ", gate_up.sizes());
  TORCH_CHECK(down.dim() == 3 && down.size(0) == gate_up.size(0) &&
                  down.size(1) == hidden.size(1) && down.size(2) * 2 == gate_up.size(1),
              "moe_experts: down must be [experts, hidden, intermediate] = [",
              gate_up.size(0), ", ", hidden.size(1), ", ", gate_up.size(1) / 2, "], got ",
              down.sizes());
  auto dtype = hidden.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16,
              "moe_experts: float32 and bfloat16 only, got ", dtype);
  TORCH_CHECK(gate_up.scalar_type() == dtype && down.scalar_type() == dtype,
              "moe_experts: weights must have hidden's dtype ", dtype, ", got ",
              gate_up.scalar_type(), " and ", down.scalar_type());
}

void gated_activation(at::Tensor& act, const at::Tensor& gate_up, int64_t activation) {
  const int64_t inter = act.size(1);
  at::Tensor gate = gate_up.narrow(1, 0, inter);
  at::Tensor up = gate_up.narrow(1, inter, inter);
  switch (activation) {
    case 0: at::silu_out(act, gate); break;
    case 1: at::gelu_out(act, gate, "none"); break;
    case 2: at::gelu_out(act, gate, "tanh"); break;
    default: TORCH_CHECK(false, "moe_experts: activation must be 0 (silu), 1 (gelu) or "
                                "2 (gelu tanh), got ", activation);
  }
  act.mul_(up);
}

}  // namespace

at::Tensor moe_experts(const at::Tensor& hidden_in, const at::Tensor& index_in,
                       const at::Tensor& weights_in, const at::Tensor& gate_up,
                       const at::Tensor& down, int64_t activation) {
  check_experts_args(hidden_in, index_in, weights_in, gate_up, down);
  const at::Tensor hidden = hidden_in.contiguous();
  const at::Tensor index = index_in.to(at::kLong).contiguous();
  const at::Tensor weights = weights_in.to(at::kFloat).contiguous();
  const int64_t tokens = hidden.size(0), h = hidden.size(1), k = index.size(1);
  const int64_t experts = gate_up.size(0), inter = gate_up.size(1) / 2;
  const int64_t slots = tokens * k;
  at::Tensor out = at::empty_like(hidden);
  if (tokens == 0) return out;

  // Counting sort of the slots by expert; pos[slot] = its row in the sorted block
  // (-1: a sentinel, no expert here).
  const int64_t* idx = index.data_ptr<int64_t>();
  std::vector<int64_t> count(experts + 1, 0), pos(slots, -1), source;
  for (int64_t s = 0; s < slots; ++s)
    if (idx[s] >= 0 && idx[s] < experts) ++count[idx[s] + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());
  const int64_t rows = count[experts];
  source.resize(rows);
  {
    std::vector<int64_t> next(count.begin(), count.end() - 1);
    for (int64_t s = 0; s < slots; ++s)
      if (idx[s] >= 0 && idx[s] < experts) {
        pos[s] = next[idx[s]]++;
        source[pos[s]] = s / k;
      }
  }

  at::Tensor xs = at::empty({rows, h}, hidden.options());
  const int64_t row_bytes = h * hidden.element_size();
  const char* src = static_cast<const char*>(hidden.data_ptr());
  char* dst = static_cast<char*>(xs.data_ptr());
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memcpy(dst + r * row_bytes, src + source[r] * row_bytes, row_bytes);
  });

  int64_t most = 0;
  for (int64_t e = 0; e < experts; ++e) most = std::max(most, count[e + 1] - count[e]);
  const bool bf16 = hidden.scalar_type() == at::kBFloat16;
  at::Tensor y;  // [rows, h]: each slot's expert output (float32 on the small path)
#if MOE_HAVE_SMALL_GEMM
  if (most <= kSmallMaxRows && small_gemm_usable() && gate_up.is_contiguous() &&
      down.is_contiguous()) {
    at::Tensor xs32 = xs.to(at::kFloat);
    at::Tensor gu = at::empty({rows, 2 * inter}, xs32.options());
    at::Tensor act = at::empty({rows, inter}, xs32.options());
    y = at::empty({rows, h}, xs32.options());
    if (bf16) {
      grouped_small_gemm(xs32.data_ptr<float>(), h,
                         reinterpret_cast<const uint16_t*>(gate_up.data_ptr()), 2 * inter,
                         count, gu.data_ptr<float>());
    } else {
      grouped_small_gemm(xs32.data_ptr<float>(), h, gate_up.data_ptr<float>(), 2 * inter,
                         count, gu.data_ptr<float>());
    }
    if (rows > 0) gated_activation(act, gu, activation);
    if (bf16) {
      grouped_small_gemm(act.data_ptr<float>(), inter,
                         reinterpret_cast<const uint16_t*>(down.data_ptr()), h, count,
                         y.data_ptr<float>());
    } else {
      grouped_small_gemm(act.data_ptr<float>(), inter, down.data_ptr<float>(), h, count,
                         y.data_ptr<float>());
    }
  }
#endif
  if (!y.defined()) {
    at::Tensor gu = at::empty({rows, 2 * inter}, hidden.options());
    y = at::empty({rows, h}, hidden.options());
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t n = count[e + 1] - count[e];
      if (n == 0) continue;
      at::Tensor gu_e = gu.narrow(0, count[e], n);
      at::mm_out(gu_e, xs.narrow(0, count[e], n), gate_up[e].t());
    }
    at::Tensor act = at::empty({rows, inter}, hidden.options());
    if (rows > 0) gated_activation(act, gu, activation);
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t n = count[e + 1] - count[e];
      if (n == 0) continue;
      at::Tensor y_e = y.narrow(0, count[e], n);
      at::mm_out(y_e, act.narrow(0, count[e], n), down[e].t());
    }
  }
  const bool y_bf16 = y.scalar_type() == at::kBFloat16;

  const float* w = weights.data_ptr<float>();
  at::parallel_for(0, tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(bf16 ? h : 0);
    for (int64_t t = begin; t < end; ++t) {
      float* a = bf16 ? acc.data() : out.data_ptr<float>() + t * h;
      std::fill(a, a + h, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = pos[t * k + j];
        if (p < 0) continue;
        if (y_bf16)
          accumulate_bf16(a, y.data_ptr<c10::BFloat16>() + p * h, w[t * k + j], h);
        else
          accumulate_f32(a, y.data_ptr<float>() + p * h, w[t * k + j], h);
      }
      if (bf16) store_bf16(out.data_ptr<c10::BFloat16>() + t * h, a, h);
    }
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> moe_router(
    const at::Tensor& hidden_in, const at::Tensor& weight, int64_t top_k, int64_t scoring,
    const c10::optional<at::Tensor>& bias, double softcap) {
  TORCH_CHECK(hidden_in.dim() == 2 && weight.dim() == 2 && weight.size(1) == hidden_in.size(1),
              "moe_router: hidden must be [tokens, hidden] and weight [experts, hidden], got ",
              hidden_in.sizes(), " and ", weight.sizes());
  const int64_t tokens = hidden_in.size(0), experts = weight.size(0);
  TORCH_CHECK(top_k >= 1 && top_k <= experts, "moe_router: top_k must be in [1, ", experts,
              "], got ", top_k);
  TORCH_CHECK(scoring == 0 || scoring == 1,
              "moe_router: scoring must be 0 (softmax) or 1 (sigmoid), got ", scoring);
  TORCH_CHECK(!bias.has_value() || bias->numel() == experts,
              "moe_router: bias must have one value per expert (", experts, ")");
  at::Tensor logits = at::mm(hidden_in, weight.t());
  at::Tensor logits32 = logits.to(at::kFloat).contiguous();
  if (scoring == 1 && softcap > 0.0)
    logits32 = at::tanh(logits32 / softcap).mul_(softcap).contiguous();
  at::Tensor bias32 = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor weights = at::empty({tokens, top_k}, logits32.options());
  at::Tensor indices = at::empty({tokens, top_k}, logits32.options().dtype(at::kLong));
  const float* l = logits32.data_ptr<float>();
  const float* b = bias32.defined() ? bias32.data_ptr<float>() : nullptr;
  float* wout = weights.data_ptr<float>();
  int64_t* iout = indices.data_ptr<int64_t>();
  at::parallel_for(0, tokens, 32, [&](int64_t begin, int64_t end) {
    std::vector<float> score(experts), select(experts);
    std::vector<int64_t> order(experts);
    for (int64_t t = begin; t < end; ++t) {
      const float* row = l + t * experts;
      if (scoring == 0) {
        float mx = *std::max_element(row, row + experts), sum = 0.0f;
        for (int64_t e = 0; e < experts; ++e) sum += (score[e] = std::exp(row[e] - mx));
        for (int64_t e = 0; e < experts; ++e) select[e] = (score[e] /= sum);
      } else {
        for (int64_t e = 0; e < experts; ++e) {
          score[e] = 1.0f / (1.0f + std::exp(-row[e]));
          select[e] = score[e] + (b ? b[e] : 0.0f);
        }
      }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                        [&](int64_t a, int64_t c) {
                          return select[a] > select[c] || (select[a] == select[c] && a < c);
                        });
      float total = 0.0f;
      for (int64_t j = 0; j < top_k; ++j) total += score[order[j]];
      for (int64_t j = 0; j < top_k; ++j) {
        iout[t * top_k + j] = order[j];
        wout[t * top_k + j] = score[order[j]] / total;
      }
    }
  });
  return {scoring == 1 ? logits32 : logits, weights.to(hidden_in.scalar_type()), indices};
}
