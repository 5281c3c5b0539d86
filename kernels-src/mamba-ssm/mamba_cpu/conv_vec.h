// The conv loops for the shapes the models run, written on 8-float GCC vector
// types so every copy (DEFAULT, AVX2, AVX-512) vectorizes them the same way
// without intrinsics. Included by kernels_impl.h inside its anonymous
// namespace (after load/store, exp_approx and the ConvArgs helpers).
//
// Prefill (`conv_rows_fixed`, float32): channel-last rows, a block of 8
// channels at a time walks a run of rows with the K taps and the last K - 1
// inputs in registers, so each input is loaded once and the SiLU is applied
// before the single store (the general row loop made K + 3 passes over a row
// buffer).
//
// Decode (`conv_update_w4s4`): Transformers' state of width 4 positions per
// channel, contiguous. Two channels fill a vector as they sit in memory
// ([s0 s1 s2 s3 | s0 s1 s2 s3]); one shuffle shifts in the new input, the
// result is stored back in place, and its product with the weights (same
// [D, 4] layout) is reduced across each channel's four lanes by shuffles. One
// pass over state and weights, no scratch buffer.
#pragma once

#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v8 __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t v8i __attribute__((vector_size(8 * sizeof(int32_t))));
typedef uint32_t v8u __attribute__((vector_size(8 * sizeof(uint32_t))));
typedef uint16_t v8h __attribute__((vector_size(8 * sizeof(uint16_t))));

inline v8 splat8(float f) { return v8{f, f, f, f, f, f, f, f}; }

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline v8 load8(const bf16_bits* p) {
  v8h h;
  std::memcpy(&h, p, sizeof h);
  const v8u u = __builtin_convertvector(h, v8u) << 16;
  v8 v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

// float_to_bf16 on 8 lanes (round to nearest even; NaN stays a quiet NaN).
inline void store8(bf16_bits* p, v8 v) {
  v8u u;
  std::memcpy(&u, &v, sizeof u);
  const v8u rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const v8u quiet = (u >> 16) | 0x40u;
  const v8u bits = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
#ifdef __AVX2__
  // GCC narrows a vector lane by lane; a pack (every lane is below 2^16) and a
  // lane fix-up do it in two instructions.
  __m256i packed;
  std::memcpy(&packed, &bits, sizeof packed);
  packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(packed, packed), 0xd8);
  std::memcpy(p, &packed, sizeof(v8h));
#else
  const v8h h = __builtin_convertvector(bits, v8h);
  std::memcpy(p, &h, sizeof h);
#endif
}

// exp_approx on 8 lanes (the same steps, so the same results up to FMA contraction).
inline v8 exp8(v8 x) {
  x = x < splat8(-87.0f) ? splat8(-87.0f) : x;
  x = x > splat8(88.0f) ? splat8(88.0f) : x;
  const v8 y = x * 1.44269504f;
  const v8i ni = __builtin_convertvector(y + (y >= splat8(0.0f) ? splat8(0.5f) : splat8(-0.5f)),
                                         v8i);
  const v8 n = __builtin_convertvector(ni, v8);
  v8 r = x - n * 0.693145752f;
  r = r - n * 1.42860677e-6f;
  const v8 p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6.0f + r * (1.0f / 24.0f +
                                                         r * (1.0f / 120.0f + r * (1.0f / 720.0f))))));
  const v8i bits = (ni + 127) << 23;
  v8 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline v8 silu8(v8 v) { return v / (1.0f + exp8(-v)); }

// Rows [l0, l1) of one batch row, channels [d0, d1): the scalar form of the
// loop below, for the channels past the last full block of 8.
template <typename T, int K, bool Silu>
void conv_rows_tail(const ConvArgs& a, const T* xb, T* ob, int64_t l0, int64_t l1, int64_t d0,
                    int64_t d1) {
  for (int64_t d = d0; d < d1; ++d) {
    const float bias = a.bias ? a.bias[d] : 0.0f;
    for (int64_t l = l0; l < l1; ++l) {
      float acc = bias;
      for (int k = 0; k < K; ++k) {
        const int64_t src = l - (K - 1) + k;
        if (src >= 0) acc += a.w[k * a.dim + d] * load(xb, src * a.x_sl + d);
      }
      store(ob, l * a.o_sl + d, Silu ? silu(acc) : acc);
    }
  }
}

// Channel-last x and out (x_sd == o_sd == 1): one item is a.row_block rows of
// one batch row (the rows an 8-channel block walks stay in L1 for the next block). Per block of 8 channels the taps and the K - 1 previous
// inputs live in registers while the rows go by.
template <typename T, int K, bool Silu>
void conv_rows_fixed(const ConvArgs& a, int64_t begin, int64_t end) {
  const int64_t D = a.dim, rb = a.row_block, blocks = (a.len + rb - 1) / rb;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / blocks, l0 = item % blocks * rb;
    const int64_t l1 = l0 + rb < a.len ? l0 + rb : a.len;
    const T* xb = static_cast<const T*>(a.x) + b * a.x_sb;
    T* ob = static_cast<T*>(a.out) + b * a.o_sb;
    int64_t d = 0;
    for (; d + 8 <= D; d += 8) {
      v8 w[K], win[K];
      for (int k = 0; k < K; ++k) w[k] = load8(a.w + k * D + d);
      const v8 bias = a.bias ? load8(a.bias + d) : v8{};
      for (int k = 0; k + 1 < K; ++k) {
        const int64_t src = l0 - (K - 1) + k;
        win[k] = src >= 0 ? load8(xb + src * a.x_sl + d) : v8{};
      }
      for (int64_t l = l0; l < l1; ++l) {
        win[K - 1] = load8(xb + l * a.x_sl + d);
        v8 acc = bias;
        for (int k = 0; k < K; ++k) acc += w[k] * win[k];
        store8(ob + l * a.o_sl + d, Silu ? silu8(acc) : acc);
        for (int k = 0; k + 1 < K; ++k) win[k] = win[k + 1];
      }
    }
    if (d < D) conv_rows_tail<T, K, Silu>(a, xb, ob, l0, l1, d, D);
  }
}

// Whether conv_rows_fixed takes this call (the backend chose a row block for it).
inline bool conv_rows_fixed_applies(const ConvArgs& a) { return a.row_block > 0; }

template <typename T, bool Silu>
void conv_rows_width(const ConvArgs& a, int64_t begin, int64_t end) {
  if (a.width == 4) {
    conv_rows_fixed<T, 4, Silu>(a, begin, end);
  } else if (a.width == 3) {
    conv_rows_fixed<T, 3, Silu>(a, begin, end);
  } else {
    conv_rows_fixed<T, 2, Silu>(a, begin, end);
  }
}

// The sum of each channel's 4 lanes in p[0..3] (channels 2j and 2j + 1 in p[j]),
// in channel order.
inline v8 reduce_quads(const v8 p[4]) {
  const v8 t0 = __builtin_shuffle(p[0], p[1], v8i{0, 1, 8, 9, 4, 5, 12, 13}) +
                __builtin_shuffle(p[0], p[1], v8i{2, 3, 10, 11, 6, 7, 14, 15});
  const v8 t1 = __builtin_shuffle(p[2], p[3], v8i{0, 1, 8, 9, 4, 5, 12, 13}) +
                __builtin_shuffle(p[2], p[3], v8i{2, 3, 10, 11, 6, 7, 14, 15});
  const v8 u = __builtin_shuffle(t0, t1, v8i{0, 2, 8, 10, 4, 6, 12, 14}) +
               __builtin_shuffle(t0, t1, v8i{1, 3, 9, 11, 5, 7, 13, 15});
  return __builtin_shuffle(u, v8i{0, 4, 1, 5, 2, 6, 3, 7});
}

// One token, width 4, a contiguous state of 4 positions per channel, channels
// [d0, d1) of batch row b: shift, dot, bias and SiLU in one pass, the state
// updated in place.
template <typename T, bool Silu>
void conv_update_w4s4(const ConvUpdateArgs& a, int64_t b, int64_t d0, int64_t d1) {
  const T* x = static_cast<const T*>(a.x) + b * a.x_sb;
  T* st = static_cast<T*>(a.state) + b * a.s_sb;
  T* out = static_cast<T*>(a.out) + b * a.o_sb;
  const float* wt = a.w;
  int64_t d = d0;
  for (; d + 8 <= d1; d += 8) {
    v8 xv;
    if (a.x_sd == 1) {
      xv = load8(x + d);
    } else {
      for (int i = 0; i < 8; ++i) xv[i] = load(x, (d + i) * a.x_sd);
    }
    v8 s[4], p[4];
    for (int j = 0; j < 4; ++j) s[j] = load8(st + (d + 2 * j) * 4);
    s[0] = __builtin_shuffle(s[0], xv, v8i{1, 2, 3, 8, 5, 6, 7, 9});
    s[1] = __builtin_shuffle(s[1], xv, v8i{1, 2, 3, 10, 5, 6, 7, 11});
    s[2] = __builtin_shuffle(s[2], xv, v8i{1, 2, 3, 12, 5, 6, 7, 13});
    s[3] = __builtin_shuffle(s[3], xv, v8i{1, 2, 3, 14, 5, 6, 7, 15});
    for (int j = 0; j < 4; ++j) {
      store8(st + (d + 2 * j) * 4, s[j]);
      p[j] = s[j] * load8(wt + (d + 2 * j) * 4);
    }
    v8 acc = reduce_quads(p);
    if (a.bias) acc += load8(a.bias + d);
    if (Silu) acc = silu8(acc);
    if (a.o_sd == 1) {
      store8(out + d, acc);
    } else {
      for (int i = 0; i < 8; ++i) store(out, (d + i) * a.o_sd, acc[i]);
    }
  }
  for (; d < d1; ++d) {
    T* sc = st + d * 4;
    const float xv = load(x, d * a.x_sd);
    const float s1 = load(sc, 1), s2 = load(sc, 2), s3 = load(sc, 3);
    const float* w = wt + d * 4;
    float acc = (w[0] * s1 + w[1] * s2) + (w[2] * s3 + w[3] * xv);
    if (a.bias) acc += a.bias[d];
    store(sc, 0, s1);
    store(sc, 1, s2);
    store(sc, 2, s3);
    store(sc, 3, xv);
    store(out, d * a.o_sd, Silu ? silu(acc) : acc);
  }
}
