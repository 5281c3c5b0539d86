// The rotation loops, written once with GCC/Clang vector extensions and
// compiled once per CPU capability: the including file picks the instruction
// set (a target pragma) and names the table this copy exports. Everything else
// is in an anonymous namespace and no torch header is included, so no copy can
// lend a function compiled for a wider instruction set to another.
//
// Each chunk of 64 bytes of compute values (16 floats or 8 doubles) is loaded,
// rotated and stored with plain vector arithmetic; bf16/fp16 are widened to
// float in registers and rounded once on store. A baseline build splits the
// 64-byte vectors into SSE2 registers, AVX2 into two ymm, AVX-512 uses one zmm.
#pragma once

#include "kernels.h"

#include <cstdint>
#include <cstring>

#ifndef ROTARY_KERNEL_TABLE
#error "define ROTARY_KERNEL_TABLE before including kernels_impl.h"
#endif

namespace rotary_cpu {
namespace {

typedef float F32x16 __attribute__((vector_size(64)));
typedef double F64x8 __attribute__((vector_size(64)));
typedef uint32_t U32x16 __attribute__((vector_size(64)));
typedef int32_t I32x16 __attribute__((vector_size(64)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));

template <typename To, typename From>
inline To bits_as(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

// bf16 -> float is exact: the bf16 bits are the float's upper half.
inline float bf16_to_float(uint16_t h) {
  return bits_as<float>(static_cast<uint32_t>(h) << 16);
}

// float -> bf16 rounding to nearest even, NaN kept a (quiet) NaN: torch's rule.
inline uint16_t float_to_bf16(float f) {
  if (f != f) {
    return 0x7FC0;
  }
  const uint32_t bits = bits_as<uint32_t>(f);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// How one storage type loads into and stores from its compute vector.
struct F32 {
  using T = float;
  using S = float;
  using V = F32x16;
  static constexpr int64_t kWidth = 16;
  static V load(const T* p) { V v; std::memcpy(&v, p, sizeof v); return v; }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  static S load1(const T* p) { return *p; }
  static void store1(T* p, S v) { *p = v; }
};

struct F64 {
  using T = double;
  using S = double;
  using V = F64x8;
  static constexpr int64_t kWidth = 8;
  static V load(const T* p) { V v; std::memcpy(&v, p, sizeof v); return v; }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  static S load1(const T* p) { return *p; }
  static void store1(T* p, S v) { *p = v; }
};

struct BF16 {
  using T = uint16_t;
  using S = float;
  using V = F32x16;
  static constexpr int64_t kWidth = 16;
  static V load(const T* p) {
    U16x16 raw;
    std::memcpy(&raw, p, sizeof raw);
    return bits_as<V>(__builtin_convertvector(raw, U32x16) << 16);
  }
  static void store(T* p, const V& v) {
    const U32x16 bits = bits_as<U32x16>(v);
    U32x16 rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const I32x16 is_nan = v != v;
    rounded = is_nan ? U32x16{} + 0x7FC0u : rounded;
    const U16x16 narrow = __builtin_convertvector(rounded, U16x16);
    std::memcpy(p, &narrow, sizeof narrow);
  }
  static S load1(const T* p) { return bf16_to_float(*p); }
  static void store1(T* p, S v) { *p = float_to_bf16(v); }
};

// IEEE half <-> float with integer and float arithmetic only, written for a
// scalar (V = float, U = uint32_t) or a vector type alike: _Float16
// conversions would call libgcc helpers on CPUs without F16C, which would tie
// the library to GCC 12's runtime for no gain.
template <typename V, typename U>
inline V half_bits_to_float(U h) {
  const U magnitude = (h & 0x7FFFu) << 13;
  // 2^112 moves the exponent bias from 15 to 127; exact for normals and subnormals.
  const V finite = bits_as<V>(magnitude) * 0x1p112f;
  const V special = bits_as<V>(magnitude | 0x7F800000u);  // inf / NaN
  const U sign = (h & 0x8000u) << 16;
  const U bits = ((h & 0x7C00u) == 0x7C00u) ? bits_as<U>(special) : bits_as<U>(finite);
  return bits_as<V>(bits | sign);
}

template <typename V, typename U>
inline U float_to_half_bits(V f) {
  const U bits = bits_as<U>(f);
  const U sign = (bits >> 16) & 0x8000u;
  const V magnitude = bits_as<V>(bits & 0x7FFFFFFFu);
  const U abs_bits = bits_as<U>(magnitude);
  // Normal halves: rebias and round to nearest even on the 13 dropped bits.
  const U normal = (abs_bits + 0xC8000FFFu + ((abs_bits >> 13) & 1u)) >> 13;
  // Subnormal halves: adding 0.5 makes the float unit 2^-24, the half subnormal
  // unit, so the float addition rounds exactly as the half must.
  const U subnormal = bits_as<U>(magnitude + 0.5f) - 0x3F000000u;
  U out = magnitude < 0x1p-14f ? subnormal : normal;
  out = magnitude >= 65520.0f ? U{} + 0x7C00u : out;
  out = magnitude != magnitude ? U{} + 0x7E00u : out;
  return out | sign;
}

struct F16 {
  using T = uint16_t;
  using S = float;
  using V = F32x16;
  static constexpr int64_t kWidth = 16;
  static V load(const T* p) {
    U16x16 raw;
    std::memcpy(&raw, p, sizeof raw);
    return half_bits_to_float<V, U32x16>(__builtin_convertvector(raw, U32x16));
  }
  static void store(T* p, const V& v) {
    const U16x16 narrow = __builtin_convertvector(float_to_half_bits<V, U32x16>(v), U16x16);
    std::memcpy(p, &narrow, sizeof narrow);
  }
  static S load1(const T* p) { return half_bits_to_float<float, uint32_t>(*p); }
  static void store1(T* p, S v) { *p = static_cast<uint16_t>(float_to_half_bits<float, uint32_t>(v)); }
};

template <typename St>
struct Row {
  using T = typename St::T;
  const T* x1;
  const T* x2;
  const T* c1;
  const T* c2;
  const T* s1;
  const T* s2;
  T* y1;
  T* y2;
};

// One half-row pair. `Conj` is a template argument so the sign costs nothing.
template <typename St, bool Conj>
inline void rotate_row(const Row<St>& r, int64_t n) {
  using V = typename St::V;
  using S = typename St::S;
  int64_t i = 0;
  for (; i + St::kWidth <= n; i += St::kWidth) {
    const V a = St::load(r.x1 + i);
    const V b = St::load(r.x2 + i);
    const V sa = St::load(r.s1 + i);
    const V sb = St::load(r.s2 + i);
    const V ya = Conj ? a * St::load(r.c1 + i) + b * sa : a * St::load(r.c1 + i) - b * sa;
    const V yb = Conj ? b * St::load(r.c2 + i) - a * sb : b * St::load(r.c2 + i) + a * sb;
    St::store(r.y1 + i, ya);
    St::store(r.y2 + i, yb);
  }
  for (; i < n; ++i) {
    const S a = St::load1(r.x1 + i);
    const S b = St::load1(r.x2 + i);
    const S sa = St::load1(r.s1 + i);
    const S sb = St::load1(r.s2 + i);
    const S ya = Conj ? a * St::load1(r.c1 + i) + b * sa : a * St::load1(r.c1 + i) - b * sa;
    const S yb = Conj ? b * St::load1(r.c2 + i) - a * sb : b * St::load1(r.c2 + i) + a * sb;
    St::store1(r.y1 + i, ya);
    St::store1(r.y2 + i, yb);
  }
}

template <typename T>
inline T* at(const Operand& o, int64_t i0, int64_t i1, int64_t i2) {
  return static_cast<T*>(const_cast<void*>(o.data)) + i0 * o.stride[0] + i1 * o.stride[1] +
         i2 * o.stride[2];
}

template <typename St, bool Conj>
void rotate_rows(const RotaryArgs& a, int64_t begin, int64_t end) {
  using T = typename St::T;
  int64_t i2 = begin % a.size[2];
  int64_t i1 = (begin / a.size[2]) % a.size[1];
  int64_t i0 = begin / (a.size[2] * a.size[1]);
  for (int64_t row = begin; row < end; ++row) {
    const Row<St> r{at<T>(a.x1, i0, i1, i2),   at<T>(a.x2, i0, i1, i2),
                    at<T>(a.cos1, i0, i1, i2), at<T>(a.cos2, i0, i1, i2),
                    at<T>(a.sin1, i0, i1, i2), at<T>(a.sin2, i0, i1, i2),
                    at<T>(a.y1, i0, i1, i2),   at<T>(a.y2, i0, i1, i2)};
    rotate_row<St, Conj>(r, a.n);
    if (++i2 == a.size[2]) {
      i2 = 0;
      if (++i1 == a.size[1]) {
        i1 = 0;
        ++i0;
      }
    }
  }
}

template <typename St>
void rotate_as(const RotaryArgs& args, int64_t begin, int64_t end) {
  if (args.conj) {
    rotate_rows<St, true>(args, begin, end);
  } else {
    rotate_rows<St, false>(args, begin, end);
  }
}

void rotate(const RotaryArgs& args, int64_t begin, int64_t end) {
  switch (args.dtype) {
    case DType::Float32:
      return rotate_as<F32>(args, begin, end);
    case DType::Float64:
      return rotate_as<F64>(args, begin, end);
    case DType::BFloat16:
      return rotate_as<BF16>(args, begin, end);
    case DType::Float16:
      return rotate_as<F16>(args, begin, end);
  }
}

constexpr KernelTable kTable{ROTARY_CAPABILITY, &rotate};

}  // namespace

const KernelTable* ROTARY_KERNEL_TABLE() {
  return &kTable;
}

}  // namespace rotary_cpu
