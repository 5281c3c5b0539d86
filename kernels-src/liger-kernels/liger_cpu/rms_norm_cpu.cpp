// The CPU op: one pass per row (sum of squares, then scale and weight) instead
// of the five eager ops of LlamaRMSNorm. Rows are split over torch's intra-op
// threads. The loops are compiled for AVX-512, AVX2 and baseline x86-64 (GCC's
// target_clones; the loader picks one for the CPU at load time) or plainly on
// other systems. The sum of squares runs in kLanes fixed partial sums, combined
// in a fixed order, so every copy gives the same bits (no FMA contraction:
// -ffp-contract=off in build.toml). Only torch's stable ABI is used, so one
// build loads on torch 2.13 and later.
#include "../liger_common/op_checks.h"
#include "registration.h"

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace liger_cpu {
namespace {

constexpr int kLanes = 16;
// Below this many elements per task one thread beats waking the pool.
constexpr int64_t kGrainElements = 16384;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LIGER_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LIGER_CLONES
#endif

// float64 keeps double precision; every other type accumulates in float32,
// as LlamaRMSNorm's `hidden_states.to(torch.float32)` does.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline __attribute__((always_inline)) void norm_rows(const T* x, const T* weight, T* y,
                                                     int64_t begin, int64_t end, int64_t hidden,
                                                     double eps) {
  using A = Acc<T>;
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * hidden;
    T* yr = y + r * hidden;
    A lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= hidden; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const A v = static_cast<A>(xr[i + l]);
        lanes[l] += v * v;
      }
    }
    for (int l = 0; i < hidden; ++i, ++l) {
      const A v = static_cast<A>(xr[i]);
      lanes[l] += v * v;
    }
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) {
        lanes[l] += lanes[l + width];
      }
    }
    const A variance = lanes[0] / static_cast<A>(hidden);
    const A rstd = A(1) / std::sqrt(variance + static_cast<A>(eps));
    for (int64_t j = 0; j < hidden; ++j) {
      // The normalized value is rounded to T before the weight multiplies it
      // (`weight * hidden.to(input_dtype)`); the product is rounded once more.
      const T normed = static_cast<T>(static_cast<A>(xr[j]) * rstd);
      yr[j] = static_cast<T>(static_cast<A>(weight[j]) * static_cast<A>(normed));
    }
  }
}

using RowsFn = void (*)(const void*, const void*, void*, int64_t, int64_t, int64_t, double);

#define LIGER_ROWS(NAME, T)                                                                    \
  LIGER_CLONES void NAME(const void* x, const void* w, void* y, int64_t begin, int64_t end,    \
                         int64_t hidden, double eps) {                                         \
    norm_rows<T>(static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), begin, \
                 end, hidden, eps);                                                            \
  }

LIGER_ROWS(rows_float, float)
LIGER_ROWS(rows_double, double)
LIGER_ROWS(rows_bfloat16, c10::BFloat16)
LIGER_ROWS(rows_half, c10::Half)

RowsFn rows_for(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float:
      return rows_float;
    case ScalarType::Double:
      return rows_double;
    case ScalarType::BFloat16:
      return rows_bfloat16;
    case ScalarType::Half:
      return rows_half;
    default:  // refused by check_rms_norm_args
      return nullptr;
  }
}

}  // namespace
}  // namespace liger_cpu

Tensor rms_norm(Tensor x, Tensor weight, double eps) {
  STD_TORCH_CHECK(x.is_cpu() && weight.is_cpu(), "liger rms_norm: expected CPU tensors");
  const int64_t rows = liger_common::check_rms_norm_args(x, weight);
  const liger_cpu::RowsFn rows_fn = liger_cpu::rows_for(x.scalar_type());
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  Tensor out = torch::stable::empty_like(xc);
  if (rows == 0) {
    return out;
  }
  const int64_t hidden = xc.size(-1);
  const void* xp = xc.const_data_ptr();
  const void* wp = wc.const_data_ptr();
  void* yp = out.mutable_data_ptr();
  const int64_t grain = std::max<int64_t>(1, liger_cpu::kGrainElements / hidden);
  torch::stable::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    rows_fn(xp, wp, yp, begin, end, hidden, eps);
  });
  return out;
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("rms_norm", TORCH_BOX(&rms_norm));
}
