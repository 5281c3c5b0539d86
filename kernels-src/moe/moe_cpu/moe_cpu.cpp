// CPU ops of the moe kernel: fused experts and the top-k router.
//
// Experts: the (token, slot) pairs are counting-sorted by expert once and their rows
// gathered into one contiguous block. Each expert's rows then take one of two paths,
// chosen per expert by its row count against a threshold measured per CPU and dtype
// (kGemmFrom below): few rows (a decode token, the handful of rows each of many experts
// gets in a short prefill) go through the kernel's own few-rows loop, all such experts
// in one parallel region; many rows (Mixtral's 8 experts at prefill) go to ATen's GEMMs
// (oneDNN/MKL: AVX-512, AVX-512-BF16, AMX where the CPU has it), with the gated
// activation fused between the two GEMMs and the bias added by the GEMM. The few-rows
// experts are placed first in the sorted block, so their activation is one pass. Each
// token's output is then summed from its slots in float32 in slot order, weights
// applied on the way (the weighted scatter). All scratch lives in one workspace
// allocated once per call. The PyTorch paths Transformers runs instead sort with
// torch.sort, gather, permute back and reduce as separate tensor ops, or loop over
// experts with one_hot masks and index_add_.
#include "../moe_common/args.h"
#include "../torch-ext/torch_binding.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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
// An expert's run of rows in the sorted block: expert e owns rows [first, first + rows).
struct Run {
  int64_t expert, first, rows;
};

constexpr int64_t kSmallRows = 8;
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

// Transposed weights ([E, H, O], gpt-oss): y[r, o] = sum_h x[r, h] w[h, o]. Weight row h
// is contiguous over o, so the loop walks h in chunks of kChunkH rows and, within a chunk,
// sweeps the output block a strip at a time: the chunk's piece of each weight row (one
// output block wide, kOutBlockT floats) is read from memory once, contiguously, and reused
// from L1 by every strip, while the strip's R x S accumulators carry over between chunks
// through y. Reading one strip down all H rows instead (a column block, 32-256 bytes per
// row at a stride of O floats) touched a new page per row and ran gpt-oss's experts at a
// third of ATen's speed. Every output is still one FMA chain over h in order (vector FMA,
// or std::fma in the tail; the partial sum round-trips y as the same float), so its bits
// do not depend on R or on the blocking.
constexpr int64_t kChunkH = 8;
constexpr int64_t kOutBlockT = 512;

template <typename W, int R, int S>
__attribute__((target("avx2,fma"))) inline void strip_t(const float* x, int64_t h, const W* w,
                                                        int64_t out_dim, float* y, int64_t ldy,
                                                        int64_t o, int64_t h0, int64_t h1) {
  __m256 acc[R][S];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < S; ++j)
      acc[r][j] = h0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + r * ldy + o + 8 * j);
  constexpr int kLines = (8 * S * static_cast<int>(sizeof(W)) + 63) / 64;
  for (int64_t i = h0; i < h1; ++i) {
    if (i + kChunkH < h)  // the next chunk's piece of this strip, one chunk ahead
      for (int l = 0; l < kLines; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(w + (i + kChunkH) * out_dim + o) + 64 * l,
                     _MM_HINT_T0);
    __m256 wv[S];
    for (int j = 0; j < S; ++j) wv[j] = load8(w + i * out_dim + o + 8 * j);
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_set1_ps(x[r * h + i]);
      for (int j = 0; j < S; ++j) acc[r][j] = _mm256_fmadd_ps(wv[j], xb, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < S; ++j) _mm256_storeu_ps(y + r * ldy + o + 8 * j, acc[r][j]);
}

template <typename W, int R, int S>
__attribute__((target("avx2,fma"))) void small_gemm_t(const float* x, int64_t h, const W* w,
                                                       int64_t out_dim, float* y, int64_t ldy,
                                                       int64_t o0, int64_t o1) {
  for (int64_t h0 = 0; h0 < h; h0 += kChunkH) {
    const int64_t h1 = std::min(h, h0 + kChunkH);
    int64_t o = o0;
    for (; o + 8 * S <= o1; o += 8 * S) strip_t<W, R, S>(x, h, w, out_dim, y, ldy, o, h0, h1);
    for (; o + 8 <= o1; o += 8) strip_t<W, R, 1>(x, h, w, out_dim, y, ldy, o, h0, h1);
    for (; o < o1; ++o)
      for (int r = 0; r < R; ++r) {
        float sum = h0 == 0 ? 0.0f : y[r * ldy + o];
        for (int64_t i = h0; i < h1; ++i)
          sum = std::fma(widen(w[i * out_dim + o]), x[r * h + i], sum);
        y[r * ldy + o] = sum;
      }
  }
}

template <typename W>
using SmallGemm = void (*)(const float*, int64_t, const W*, float*, int64_t, int64_t, int64_t);
template <typename W>
constexpr SmallGemm<W> kSmallGemm[kSmallRows] = {
    small_gemm_one_row<W>, small_gemm_rows<W, 2>, small_gemm_rows<W, 3>, small_gemm_rows<W, 4>,
    small_gemm_rows<W, 5>, small_gemm_rows<W, 6>, small_gemm_rows<W, 7>, small_gemm_rows<W, 8>};
template <typename W>
using SmallGemmT = void (*)(const float*, int64_t, const W*, int64_t, float*, int64_t, int64_t,
                            int64_t);
template <typename W>
constexpr SmallGemmT<W> kSmallGemmT[kSmallRows] = {
    small_gemm_t<W, 1, 8>, small_gemm_t<W, 2, 4>, small_gemm_t<W, 3, 2>, small_gemm_t<W, 4, 2>,
    small_gemm_t<W, 5, 1>, small_gemm_t<W, 6, 1>, small_gemm_t<W, 7, 1>, small_gemm_t<W, 8, 1>};

bool small_gemm_usable() {
  static const bool usable = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return usable;
}

// y [rows, O] (float32) = each run's rows of x [rows, H] (float32) times w_e^T, where w is
// [E, O, H] (contiguous), or times w_e where w is [E, H, O] (transposed); plus b_e where
// biases b [E, O] are given.
template <typename W>
void grouped_small_gemm(const float* x, int64_t h, const W* w, int64_t out_dim,
                        const std::vector<Run>& runs, float* y, bool transposed,
                        const W* bias) {
  const int64_t block = transposed ? kOutBlockT : kOutBlock;
  const int64_t blocks = (out_dim + block - 1) / block;
  const int64_t items = static_cast<int64_t>(runs.size()) * blocks;
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const Run& run = runs[item / blocks];
      const int64_t o0 = (item % blocks) * block, o1 = std::min(out_dim, o0 + block);
      for (int64_t r0 = run.first; r0 < run.first + run.rows; r0 += kSmallRows) {
        const int64_t rows = std::min(kSmallRows, run.first + run.rows - r0);
        const W* we = w + run.expert * out_dim * h;
        float* yr = y + r0 * out_dim;
        if (transposed)
          kSmallGemmT<W>[rows - 1](x + r0 * h, h, we, out_dim, yr, out_dim, o0, o1);
        else
          kSmallGemm<W>[rows - 1](x + r0 * h, h, we, yr, out_dim, o0, o1);
        if (bias != nullptr)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = o0; o < o1; ++o)
              yr[r * out_dim + o] += widen(bias[run.expert * out_dim + o]);
      }
    }
  });
}
#else
#define MOE_HAVE_SMALL_GEMM 0
bool small_gemm_usable() { return false; }
#endif

// From how many rows an expert's GEMMs go to ATen rather than the few-rows loop, by
// the CPU's widest GEMM instructions and the dtype. Measured with
// benchmarks/threshold.py (thread CPU time on one thread, every expert given the same
// row count, the two paths interleaved, at Qwen3-MoE's and Mixtral's expert shapes; the
// table is in the README). kNever: the loop won at every measured count. Tiers without
// a measurement keep the limit the kernel had before the table (32 rows) and say so.
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
enum class Isa { kAvx2, kAvx512, kAvx512Bf16, kAmx };
// A row with `transposed` set is for [E, H, O] weights (gpt-oss) and wins over the plain
// row; `below` sends experts with fewer rows to ATen as well (its matrix-vector product
// streamed gpt-oss's float32 weights faster than the loop's one-row pass).
struct GemmFrom {
  Isa isa;
  at::ScalarType dtype;
  int64_t rows;
  const char* measured;
  bool transposed = false;
  int64_t below = 0;
};
constexpr GemmFrom kGemmFrom[] = {
    // gpt-oss (H = I = 2880), thread CPU time per call against ATen: loop/ATen 1.5x at 1
    // row, 0.69 at 2, 0.83 at 8, 1.05 at 12, 1.2 at 16.
    {Isa::kAvx2, at::kFloat, 12, "AMD EPYC (Zen 2), avx2 fma", true, 2},
    // The loop/GEMM crossing was at 24 rows (Qwen3-MoE) and 48 (Mixtral).
    {Isa::kAvx2, at::kFloat, 32, "AMD EPYC (Zen 2), avx2 fma"},
    // ATen's bfloat16 GEMM without AVX-512-BF16 ran at 1/4-1/5 of the loop, 1 to 64 rows.
    {Isa::kAvx2, at::kBFloat16, kNever, "AMD EPYC (Zen 2), avx2 fma"},
    {Isa::kAvx512, at::kFloat, 32, "not measured (no such CPU here)"},
    {Isa::kAvx512, at::kBFloat16, 32, "not measured (no such CPU here)"},
    {Isa::kAvx512Bf16, at::kFloat, 32, "not measured (no such CPU here)"},
    {Isa::kAvx512Bf16, at::kBFloat16, 32, "not measured (no such CPU here)"},
    {Isa::kAmx, at::kFloat, 32, "not measured (no such CPU here)"},
    {Isa::kAmx, at::kBFloat16, 32, "not measured (no such CPU here)"},
};

Isa cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const Isa isa = __builtin_cpu_supports("amx-bf16")      ? Isa::kAmx
                         : __builtin_cpu_supports("avx512bf16") ? Isa::kAvx512Bf16
                         : __builtin_cpu_supports("avx512f")    ? Isa::kAvx512
                                                                : Isa::kAvx2;
  return isa;
#else
  return Isa::kAvx2;
#endif
}

// The row of kGemmFrom for this CPU, dtype and layout (a transposed layout without a
// row of its own takes the plain one); ATen for all when nothing matches.
GemmFrom gemm_rule(at::ScalarType dtype, bool transposed) {
  const Isa isa = cpu_isa();
  for (const bool want : {transposed, false})
    for (const GemmFrom& row : kGemmFrom)
      if (row.isa == isa && row.dtype == dtype && row.transposed == want) return row;
  return {isa, dtype, 1, "no row"};
}

// The gated activations: out = act(gate) * up, gate and up either the two halves of a
// row (concatenated) or its even and odd columns (interleaved), or gpt-oss's clamped
// SwiGLU (3): (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit).
struct Gate {
  int64_t activation;
  bool interleaved;
  float alpha, limit;
};

inline float gate_value(float g, float u, const Gate& how) {
  switch (how.activation) {
    case 0: return g / (1.0f + std::exp(-g)) * u;
    case 1: return 0.5f * g * (1.0f + std::erf(g * 0.70710678118654752f)) * u;
    case 2: {
      const float inner = 0.79788456080286536f * (g + 0.044715f * g * g * g);
      return 0.5f * g * (1.0f + std::tanh(inner)) * u;
    }
    default: {
      g = std::min(g, how.limit);
      u = std::min(std::max(u, -how.limit), how.limit);
      return (u + 1.0f) * (g / (1.0f + std::exp(-how.alpha * g)));
    }
  }
}

inline float to_float(float v) { return v; }
inline float to_float(c10::BFloat16 v) { return static_cast<float>(v); }

// act [rows, I] from gu [rows, 2I], rows in parallel; T and U float or bfloat16 (bfloat16
// widened on read, rounded once on write).
template <typename T, typename U>
void apply_gate(const T* gu, U* act, int64_t rows, int64_t inter, const Gate& how) {
  const int64_t g_step = how.interleaved ? 2 : 1;
  const int64_t u_off = how.interleaved ? 1 : inter;
  at::parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(inter, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const T* row = gu + r * 2 * inter;
                       U* out = act + r * inter;
                       for (int64_t i = 0; i < inter; ++i)
                         out[i] = static_cast<U>(gate_value(to_float(row[i * g_step]),
                                                            to_float(row[i * g_step + u_off]),
                                                            how));
                     }
                   });
}

void apply_gate(const at::Tensor& gu, const at::Tensor& act, const Gate& how) {
  const int64_t rows = gu.size(0), inter = act.size(1);
  if (rows == 0) return;
  const bool in16 = gu.scalar_type() == at::kBFloat16, out16 = act.scalar_type() == at::kBFloat16;
  if (in16 && out16)
    apply_gate(gu.data_ptr<c10::BFloat16>(), act.data_ptr<c10::BFloat16>(), rows, inter, how);
  else if (in16)
    apply_gate(gu.data_ptr<c10::BFloat16>(), act.data_ptr<float>(), rows, inter, how);
  else if (out16)
    apply_gate(gu.data_ptr<float>(), act.data_ptr<c10::BFloat16>(), rows, inter, how);
  else
    apply_gate(gu.data_ptr<float>(), act.data_ptr<float>(), rows, inter, how);
}

// One allocation per call, carved into typed 2-D blocks (64-byte aligned).
class Workspace {
 public:
  void reserve(int64_t rows, int64_t cols, at::ScalarType dtype) {
    bytes_ += round_up(rows * cols * static_cast<int64_t>(c10::elementSize(dtype)));
  }
  void allocate(const at::TensorOptions& options) {
    buffer_ = at::empty({bytes_}, options.dtype(at::kByte));
  }
  at::Tensor take(int64_t rows, int64_t cols, at::ScalarType dtype) {
    const int64_t n = rows * cols * static_cast<int64_t>(c10::elementSize(dtype));
    at::Tensor block = buffer_.narrow(0, offset_, n).view(dtype).view({rows, cols});
    offset_ += round_up(n);
    return block;
  }

 private:
  static int64_t round_up(int64_t n) { return (n + 63) / 64 * 64; }
  int64_t bytes_ = 0, offset_ = 0;
  at::Tensor buffer_;
};

}  // namespace

at::Tensor moe_experts(const at::Tensor& hidden_in, const at::Tensor& index_in,
                       const at::Tensor& weights_in, const at::Tensor& gate_up,
                       const at::Tensor& down, int64_t activation,
                       const c10::optional<at::Tensor>& gate_up_bias,
                       const c10::optional<at::Tensor>& down_bias, bool transposed,
                       bool interleaved, double alpha, double limit, int64_t gemm_rows) {
  moe::check_experts_args(hidden_in, index_in, weights_in, gate_up, down, activation,
                          transposed, gate_up_bias, down_bias);
  const Gate how{activation, interleaved, static_cast<float>(alpha), static_cast<float>(limit)};
  const at::Tensor hidden = hidden_in.contiguous();
  const at::Tensor index = index_in.to(at::kLong).contiguous();
  const at::Tensor weights = weights_in.to(at::kFloat).contiguous();
  const int64_t tokens = hidden.size(0), h = hidden.size(1), k = index.size(1);
  const int64_t experts = gate_up.size(0), inter = down.size(transposed ? 1 : 2);
  const int64_t slots = tokens * k;
  const at::ScalarType dtype = hidden.scalar_type();
  const bool bf16 = dtype == at::kBFloat16;
  at::Tensor out = at::empty_like(hidden);
  if (tokens == 0) return out;

  // Rows per expert, and which experts take the few-rows loop: it needs AVX2 + FMA and
  // contiguous weights and biases.
  const int64_t* idx = index.data_ptr<int64_t>();
  std::vector<int64_t> count(experts, 0);
  for (int64_t s = 0; s < slots; ++s)
    if (idx[s] >= 0 && idx[s] < experts) ++count[idx[s]];
  bool small_ok = false;
#if MOE_HAVE_SMALL_GEMM
  small_ok = small_gemm_usable() && gate_up.is_contiguous() && down.is_contiguous() &&
             (!gate_up_bias.has_value() ||
              (gate_up_bias->is_contiguous() && down_bias->is_contiguous()));
#endif
  // gemm_rows >= 1 (tests, benchmarks) sets the crossing and keeps every fewer count on
  // the loop.
  const GemmFrom rule = gemm_rule(dtype, transposed);
  const int64_t gemm_from = !small_ok ? 1 : gemm_rows >= 1 ? gemm_rows : rule.rows;
  const int64_t gemm_below = !small_ok || gemm_rows >= 1 ? 0 : rule.below;
  // Few-rows experts first, then the GEMM experts, each group in expert order.
  std::vector<Run> small, large;
  int64_t rows = 0, most_large = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t n = count[e];
      if (n == 0 || (n >= gemm_from || n < gemm_below) != (pass == 1)) continue;
      (pass == 0 ? small : large).push_back({e, rows, n});
      rows += n;
      if (pass == 1) most_large = std::max(most_large, n);
    }
  const int64_t small_rows = rows - [&] {
    int64_t n = 0;
    for (const Run& run : large) n += run.rows;
    return n;
  }();

  // pos[slot] = its row in the sorted block (-1: a sentinel, no expert here).
  std::vector<int64_t> first(experts, 0), pos(slots, -1), source(rows);
  for (const auto* group : {&small, &large})
    for (const Run& run : *group) first[run.expert] = run.first;
  for (int64_t s = 0; s < slots; ++s)
    if (idx[s] >= 0 && idx[s] < experts) {
      pos[s] = first[idx[s]]++;
      source[pos[s]] = s / k;
    }

  Workspace ws;
  ws.reserve(rows, h, dtype);                                 // xs: the gathered rows
  ws.reserve(rows, h, at::kFloat);                            // y: each slot's output
  if (small_rows > 0) {
    if (bf16) ws.reserve(small_rows, h, at::kFloat);          // xs widened
    ws.reserve(small_rows, 2 * inter, at::kFloat);            // gate/up
    ws.reserve(small_rows, inter, at::kFloat);                // activation
  }
  if (most_large > 0) {
    ws.reserve(most_large, 2 * inter, dtype);                 // one expert's gate/up
    ws.reserve(most_large, inter, dtype);                     // its activation
    if (bf16) ws.reserve(most_large, h, dtype);               // its output before widening
  }
  ws.allocate(hidden.options());
  at::Tensor xs = ws.take(rows, h, dtype);
  at::Tensor y = ws.take(rows, h, at::kFloat);

  const int64_t row_bytes = h * hidden.element_size();
  const char* src = static_cast<const char*>(hidden.data_ptr());
  char* dst = static_cast<char*>(xs.data_ptr());
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memcpy(dst + r * row_bytes, src + source[r] * row_bytes, row_bytes);
  });

#if MOE_HAVE_SMALL_GEMM
  if (small_rows > 0) {
    at::Tensor xs32 = bf16 ? ws.take(small_rows, h, at::kFloat) : xs;
    if (bf16) xs32.copy_(xs.narrow(0, 0, small_rows));
    at::Tensor gu = ws.take(small_rows, 2 * inter, at::kFloat);
    at::Tensor act = ws.take(small_rows, inter, at::kFloat);
    const bool has_bias = gate_up_bias.has_value();
    if (bf16) {
      auto bits = [](const at::Tensor& t) {
        return reinterpret_cast<const uint16_t*>(t.data_ptr());
      };
      grouped_small_gemm(xs32.data_ptr<float>(), h, bits(gate_up), 2 * inter, small,
                         gu.data_ptr<float>(), transposed,
                         has_bias ? bits(*gate_up_bias) : nullptr);
      apply_gate(gu, act, how);
      grouped_small_gemm(act.data_ptr<float>(), inter, bits(down), h, small, y.data_ptr<float>(),
                         transposed, has_bias ? bits(*down_bias) : nullptr);
    } else {
      grouped_small_gemm(xs32.data_ptr<float>(), h, gate_up.data_ptr<float>(), 2 * inter, small,
                         gu.data_ptr<float>(), transposed,
                         has_bias ? gate_up_bias->data_ptr<float>() : nullptr);
      apply_gate(gu, act, how);
      grouped_small_gemm(act.data_ptr<float>(), inter, down.data_ptr<float>(), h, small,
                         y.data_ptr<float>(), transposed,
                         has_bias ? down_bias->data_ptr<float>() : nullptr);
    }
  }
#endif
  if (most_large > 0) {
    at::Tensor gu_ws = ws.take(most_large, 2 * inter, dtype);
    at::Tensor act_ws = ws.take(most_large, inter, dtype);
    at::Tensor y_ws = bf16 ? ws.take(most_large, h, dtype) : at::Tensor();
    for (const Run& run : large) {
      const int64_t e = run.expert, n = run.rows;
      const at::Tensor w1 = transposed ? gate_up[e] : gate_up[e].t();
      const at::Tensor w2 = transposed ? down[e] : down[e].t();
      at::Tensor gu = gu_ws.narrow(0, 0, n), act = act_ws.narrow(0, 0, n);
      at::Tensor ye = bf16 ? y_ws.narrow(0, 0, n) : y.narrow(0, run.first, n);
      const at::Tensor x = xs.narrow(0, run.first, n);
      if (gate_up_bias.has_value()) {
        at::addmm_out(gu, (*gate_up_bias)[e], x, w1);
        apply_gate(gu, act, how);
        at::addmm_out(ye, (*down_bias)[e], act, w2);
      } else {
        at::mm_out(gu, x, w1);
        apply_gate(gu, act, how);
        at::mm_out(ye, act, w2);
      }
      if (bf16) y.narrow(0, run.first, n).copy_(ye);
    }
  }

  const float* w = weights.data_ptr<float>();
  const float* ys = y.data_ptr<float>();
  at::parallel_for(0, tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(bf16 ? h : 0);
    for (int64_t t = begin; t < end; ++t) {
      float* a = bf16 ? acc.data() : out.data_ptr<float>() + t * h;
      std::fill(a, a + h, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = pos[t * k + j];
        if (p >= 0) accumulate_f32(a, ys + p * h, w[t * k + j], h);
      }
      if (bf16) store_bf16(out.data_ptr<c10::BFloat16>() + t * h, a, h);
    }
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> moe_router(
    const at::Tensor& hidden_in, const at::Tensor& weight, int64_t top_k, int64_t scoring,
    const c10::optional<at::Tensor>& bias, double softcap) {
  moe::check_router_args(hidden_in, weight, top_k, scoring, bias);
  const int64_t tokens = hidden_in.size(0), experts = weight.size(0);
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
