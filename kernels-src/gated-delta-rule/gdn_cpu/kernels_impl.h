// The gated delta rule loops, compiled once per CPU capability (the including
// kernels_<capability>.cpp sets the instruction set). Every helper has
// internal linkage, so the copies never stand in for each other at link time.
//
// Per (batch, value head) the state S [Dk, Dv] (float32) follows
//   S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - exp(g_t) S_{t-1}^T k_t))^T,
//   o_t = S_t^T q_t,
// read from the Gated DeltaNet paper (Yang, Kautz, Hatamizadeh, 2024). The
// chunked form applies it C tokens at a time with the UT transform of the
// DeltaNet chunkwise algorithm (Yang et al., 2024): inside a chunk, with G the
// running sum of g, A_ij = beta_i exp(G_i - G_j) k_i.k_j (j < i), the new
// values solve (I + A) U = beta (V - exp(G) K S) by forward substitution, the
// outputs are exp(G) Q S + (exp(G_i - G_j) q_i.k_j)_{j<=i} U, and the state
// becomes exp(G_L) S + (exp(G_L - G) K)^T U. Inputs of any float dtype are
// widened to float32 row by row; every sum runs in float32.
#include "gemm.h"
#include "kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef GDN_HW_BF16
#include <immintrin.h>
#endif

namespace gdn_cpu {
namespace {

template <typename T>
inline void load_row(const T* __restrict src, float* __restrict dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = static_cast<float>(src[i]);
  }
}

template <typename T>
inline void store_row(const float* __restrict src, T* __restrict dst, int64_t n) {
  int64_t i = 0;
#ifdef GDN_HW_BF16
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    for (; i + 16 <= n; i += 16) {
      const __m256bh packed = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), reinterpret_cast<const __m256i&>(packed));
    }
  }
#endif
  for (; i < n; ++i) {
    dst[i] = static_cast<T>(src[i]);
  }
}

inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) {
    acc += a[i] * b[i];
  }
  return acc;
}

// y += a * x
inline void axpy(float* __restrict y, float a, const float* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    y[i] += a * x[i];
  }
}

inline void scale_row(float* __restrict y, float a, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    y[i] *= a;
  }
}

// The same normalisation as the models' reference (x / sqrt(sum x^2 + 1e-6)),
// then the query scale.
inline void normalize(float* x, int64_t n, bool l2norm, float scale) {
  float factor = scale;
  if (l2norm) {
    factor *= 1.f / std::sqrt(dot(x, x, n) + 1e-6f);
  }
  scale_row(x, factor, n);
}

// Where the rows of one (batch, head) problem live.
struct HeadView {
  int64_t b, h, hk;
};

template <typename T>
const T* row_of(const void* base, const int64_t* stride, int64_t b, int64_t t, int64_t h) {
  return static_cast<const T*>(base) + b * stride[0] + t * stride[1] + h * stride[2];
}

template <typename T>
T* out_row(const GdnArgs& a, const HeadView& hv, int64_t t) {
  return static_cast<T*>(a.out) + ((hv.b * a.seq + t) * a.hv + hv.h) * a.dv;
}

inline int64_t gate_index(const GdnArgs& a, const HeadView& hv, int64_t t) {
  return (hv.b * a.seq + t) * a.hv + hv.h;
}

// e^x for the SiLU and the chunk's decays, in plain arithmetic the compiler vectorises inside
// `omp simd` (std::exp is a library call there): x = n ln2 + r with |r| <= ln2/2,
// e^r by its degree-6 minimax polynomial (Cephes' expf coefficients), 2^n put
// into the exponent bits. Relative error ~2e-7; x is clamped to the float range.
inline float exp_poly(float x) {
  // Selects, not std::min/max (whose references keep GCC from if-converting).
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  const float n = std::floor(x * 1.44269504089f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// Rows [t0, t0 + n) of q (scaled) and k of one key head into float buffers.
template <typename T>
void load_keys(const GdnArgs& a, int64_t b, int64_t hk, int64_t t0, int64_t n, float* q, float* k) {
  for (int64_t i = 0; i < n; ++i) {
    load_row(row_of<T>(a.q, a.q_stride, b, t0 + i, hk), q + i * a.dk, a.dk);
    load_row(row_of<T>(a.k, a.k_stride, b, t0 + i, hk), k + i * a.dk, a.dk);
    normalize(q + i * a.dk, a.dk, a.l2norm, a.scale);
    normalize(k + i * a.dk, a.dk, a.l2norm, 1.f);
  }
}

// Rows [t0, t0 + n) of q (scaled), k and v of one value head into float buffers.
template <typename T>
void load_tokens(const GdnArgs& a, const HeadView& hv, int64_t t0, int64_t n, float* q, float* k,
                 float* v) {
  load_keys<T>(a, hv.b, hv.hk, t0, n, q, k);
  for (int64_t i = 0; i < n; ++i) {
    load_row(row_of<T>(a.v, a.v_stride, hv.b, t0 + i, hv.h), v + i * a.dv, a.dv);
  }
}

// Columns of u one pass of the substitution keeps in registers (8 AVX2 / 4
// AVX-512 accumulators): each row reads the earlier rows once per block and is
// written once, not once per earlier row.
constexpr int64_t kSolveCols = 64;

// u <- (I + t)^-1 u for t [L x L] strictly lower triangular (row stride ldt),
// u [L x n] (row stride n): forward substitution, row i minus t_ij u_j (j < i).
inline void solve_unit_lower(const float* t, int64_t ldt, float* u, int64_t L, int64_t n) {
  int64_t c0 = 0;
  for (; c0 + kSolveCols <= n; c0 += kSolveCols) {
    for (int64_t i = 1; i < L; ++i) {
      float acc[kSolveCols];
      float* ui = u + i * n + c0;
      const float* ti = t + i * ldt;
#pragma omp simd
      for (int64_t c = 0; c < kSolveCols; ++c) {
        acc[c] = ui[c];
      }
      for (int64_t j = 0; j < i; ++j) {
        const float f = ti[j];
        const float* uj = u + j * n + c0;
#pragma omp simd
        for (int64_t c = 0; c < kSolveCols; ++c) {
          acc[c] -= f * uj[c];
        }
      }
#pragma omp simd
      for (int64_t c = 0; c < kSolveCols; ++c) {
        ui[c] = acc[c];
      }
    }
  }
  if (c0 < n) {
    for (int64_t i = 1; i < L; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        axpy(u + i * n + c0, -t[i * ldt + j], u + j * n + c0, n - c0);
      }
    }
  }
}

// A task is `a.task_heads` consecutive value heads of one (batch, key head):
// their queries and keys, normalised once, and the chunk's q.k / k.k products
// serve each of them (the decay and beta, per value head, are applied after).
template <typename T>
void chunked_range(const GdnArgs& a, int64_t begin, int64_t end) {
  const int64_t C = a.chunk, dk = a.dk, dv = a.dv;
  const int64_t group = a.hv / a.hk;
  // qk holds the chunk's L queries in rows [0, L) and its keys in rows
  // [L, 2L), so one product reads S for both and one gives q.k and k.k.
  std::vector<float> qk(2 * C * dk), u(C * dv), o(2 * C * dv), prod(2 * C * C);
  std::vector<float> attn(C * C), ut(C * C), G(C), beta(C);
  float* q = qk.data();
  for (int64_t task = begin; task < end; ++task) {
    const int64_t first = task * a.task_heads;
    const int64_t b = first / a.hv, h0 = first % a.hv, hk = h0 / group;
    for (int64_t t0 = 0; t0 < a.seq; t0 += C) {
      const int64_t L = std::min(C, a.seq - t0);
      float* k = q + L * dk;
      load_keys<T>(a, b, hk, t0, L, q, k);
      // prod rows [0, L): q.k (the attention), rows [L, 2L): k.k (the UT system).
      mm_nt(2 * L, L, dk, 1.f, q, dk, k, dk, 0.f, prod.data(), C);
      for (int64_t h = h0; h < h0 + a.task_heads; ++h) {
        const HeadView hv{b, h, hk};
        float* S = a.state + (b * a.hv + h) * dk * dv;
        float running = 0.f;
        for (int64_t i = 0; i < L; ++i) {
          const int64_t gi = gate_index(a, hv, t0 + i);
          running += a.g[gi];
          G[i] = running;
          beta[i] = a.beta[gi];
          load_row(row_of<T>(a.v, a.v_stride, b, t0 + i, h), u.data() + i * dv, dv);
        }
        // o rows [0, L): S^T q, rows [L, 2L): S^T k.
        mm_nn(2 * L, dv, dk, 1.f, q, dk, S, dv, 0.f, o.data(), dv);
        const float* Gp = G.data();
        for (int64_t i = 0; i < L; ++i) {
          const float* qkr = prod.data() + i * C;
          const float* kkr = prod.data() + (L + i) * C;
          float* ar = attn.data() + i * C;
          float* tr = ut.data() + i * C;
          const float gi = Gp[i], bi = beta[i];
          // exp(G_i - G_j) <= 1 for j <= i (g <= 0), vectorised.
#pragma omp simd
          for (int64_t j = 0; j <= i; ++j) {
            const float decay = exp_poly(gi - Gp[j]);
            ar[j] = qkr[j] * decay;
            tr[j] = bi * kkr[j] * decay;
          }
          for (int64_t j = i + 1; j < L; ++j) {
            ar[j] = 0.f;
          }
          // What the state carried in predicts: u_i = beta_i (v_i - exp(G_i) S^T k_i),
          // and the inter-chunk output exp(G_i) S^T q_i.
          const float eg = std::exp(gi);
          float* ui = u.data() + i * dv;
          float* oi = o.data() + i * dv;
          const float* ks = o.data() + (L + i) * dv;
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c) {
            ui[c] = bi * (ui[c] - eg * ks[c]);
            oi[c] *= eg;
          }
        }
        // The new values of the chunk: (I + A) U = beta (V - exp(G) K S).
        solve_unit_lower(ut.data(), C, u.data(), L, dv);
        // Intra-chunk outputs, added to the inter-chunk ones.
        mm_nn(L, dv, L, 1.f, attn.data(), C, u.data(), dv, 1.f, o.data(), dv);
        for (int64_t i = 0; i < L; ++i) {
          store_row(o.data() + i * dv, out_row<T>(a, hv, t0 + i), dv);
        }
        // The state at the end of the chunk: exp(G_L) S + K^T (exp(G_L - G) U), the
        // weights on U's rows so that K stays shared.
        const float last = G[L - 1];
        for (int64_t j = 0; j < L; ++j) {
          scale_row(u.data() + j * dv, std::exp(last - G[j]), dv);
        }
        mm_tn(dk, dv, L, 1.f, k, dk, u.data(), dv, std::exp(last), S, dv);
      }
    }
  }
}

// One token at a time (decode, and any length where chunking does not pay).
// With S' = a S + k v'^T and v' = beta (v - a S^T k), the output is
// S'^T q = a S^T q + (k.q) v': one read-only pass gathers S^T k and S^T q, the
// second writes S' in place, two streams over S instead of two read-modify-write.
template <typename T>
void recurrent_range(const GdnArgs& a, int64_t begin, int64_t end) {
  const int64_t dk = a.dk, dv = a.dv;
  const int64_t group = a.hv / a.hk;
  std::vector<float> q(dk), k(dk), v(dv), kv(dv), o(dv);
  for (int64_t task = begin; task < end; ++task) {
    const HeadView hv{task / a.hv, task % a.hv, (task % a.hv) / group};
    float* S = a.state + task * dk * dv;
    for (int64_t t = 0; t < a.seq; ++t) {
      load_tokens<T>(a, hv, t, 1, q.data(), k.data(), v.data());
      const int64_t gi = gate_index(a, hv, t);
      const float decay = std::exp(a.g[gi]);
      const float beta = a.beta[gi];
      std::fill(kv.begin(), kv.end(), 0.f);
      std::fill(o.begin(), o.end(), 0.f);
      float* kvp = kv.data();
      float* op = o.data();
      for (int64_t d = 0; d < dk; ++d) {
        const float* s = S + d * dv;
        const float kd = k[d], qd = q[d];
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c) {
          kvp[c] += kd * s[c];
          op[c] += qd * s[c];
        }
      }
      const float qk = dot(q.data(), k.data(), dk);
      float* vp = v.data();
#pragma omp simd
      for (int64_t c = 0; c < dv; ++c) {
        vp[c] = beta * (vp[c] - decay * kvp[c]);
        op[c] = decay * op[c] + qk * vp[c];
      }
      for (int64_t d = 0; d < dk; ++d) {
        float* s = S + d * dv;
        const float kd = k[d];
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c) {
          s[c] = decay * s[c] + kd * vp[c];
        }
      }
      store_row(o.data(), out_row<T>(a, hv, t), dv);
    }
  }
}

// Output rows [begin, end) of batch * keep: each row is one position of every
// channel, so the channel loop (unit stride in x, out and the [W, C] weight)
// vectorises; taps before the sequence start read the state (or zeros).
template <typename T>
void conv_range(const ConvArgs& a, int64_t begin, int64_t end) {
  const int64_t C = a.channels, W = a.width;
  std::vector<float> acc(C), tap(C);
  for (int64_t row = begin; row < end; ++row) {
    const int64_t b = row / a.keep;
    const int64_t t = a.seq - a.keep + row % a.keep;
    if (a.bias != nullptr) {
      std::memcpy(acc.data(), a.bias, C * sizeof(float));
    } else {
      std::fill(acc.begin(), acc.end(), 0.f);
    }
    for (int64_t w = 0; w < W; ++w) {
      const int64_t src = t - (W - 1) + w;
      const float* wt = a.weight + w * C;
      float* accp = acc.data();
      if (src >= 0) {
        const T* x = static_cast<const T*>(a.x) + b * a.x_stride[0] + src * a.x_stride[1];
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          accp[c] += wt[c] * static_cast<float>(x[c]);
        }
      } else if (a.state != nullptr) {
        // state [B, C, S]: position src < 0 is its column S + src.
        const int64_t S = a.state_width;
        const T* st = static_cast<const T*>(a.state) + b * C * S + (S + src);
        for (int64_t c = 0; c < C; ++c) {
          accp[c] += wt[c] * static_cast<float>(st[c * S]);
        }
      }
    }
    float* res = tap.data();
    const float* accp = acc.data();
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      res[c] = accp[c] / (1.f + exp_poly(-accp[c]));
    }
    store_row(res, static_cast<T*>(a.out) + row * C, C);
  }
}

void chunked(const GdnArgs& a, int64_t begin, int64_t end) {
  switch (a.dtype) {
    case c10::ScalarType::BFloat16:
      return chunked_range<c10::BFloat16>(a, begin, end);
    case c10::ScalarType::Half:
      return chunked_range<c10::Half>(a, begin, end);
    default:
      return chunked_range<float>(a, begin, end);
  }
}

void recurrent(const GdnArgs& a, int64_t begin, int64_t end) {
  switch (a.dtype) {
    case c10::ScalarType::BFloat16:
      return recurrent_range<c10::BFloat16>(a, begin, end);
    case c10::ScalarType::Half:
      return recurrent_range<c10::Half>(a, begin, end);
    default:
      return recurrent_range<float>(a, begin, end);
  }
}

void conv(const ConvArgs& a, int64_t begin, int64_t end) {
  switch (a.dtype) {
    case c10::ScalarType::BFloat16:
      return conv_range<c10::BFloat16>(a, begin, end);
    case c10::ScalarType::Half:
      return conv_range<c10::Half>(a, begin, end);
    default:
      return conv_range<float>(a, begin, end);
  }
}

const KernelTable table{GDN_CAPABILITY, &chunked, &recurrent, &conv};

}  // namespace

const KernelTable* GDN_KERNEL_TABLE() {
  return &table;
}

}  // namespace gdn_cpu
