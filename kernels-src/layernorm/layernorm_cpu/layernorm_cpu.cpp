// The CPU ops: check arguments, bring tensors into the contiguous layout the
// loops expect, split the work over torch's intra-op threads and hand plain
// pointers to the loop copy chosen for this CPU. Only torch's stable ABI is
// used, so one build loads on torch 2.13 and every later torch.
#include "kernels.h"
#include "registration.h"

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace layernorm_cpu {
namespace {

// Below this many elements per task a single thread beats waking the pool.
constexpr int64_t kGrainElements = 16384;

bool avx2_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool avx512_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  return avx2_supported() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

bool avx512_bf16_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  return avx512_supported() && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// The loops for `capability` if compiled here and this CPU runs them.
const KernelTable* table_for(const std::string& capability) {
  if (capability == "AVX512_BF16") {
    return avx512_bf16_supported() ? kernel_table_AVX512_BF16() : nullptr;
  }
  if (capability == "AVX512") {
    return avx512_supported() ? kernel_table_AVX512() : nullptr;
  }
  if (capability == "AVX2") {
    return avx2_supported() ? kernel_table_AVX2() : nullptr;
  }
  if (capability == "DEFAULT") {
    return kernel_table_DEFAULT();
  }
  return nullptr;
}

std::atomic<const KernelTable*>& active_table() {
  static std::atomic<const KernelTable*> table{[] {
    for (const char* capability : {"AVX512_BF16", "AVX512", "AVX2"}) {
      if (const KernelTable* found = table_for(capability)) {
        return found;
      }
    }
    return kernel_table_DEFAULT();
  }()};
  return table;
}

std::string shape_of(const Tensor& t) {
  std::ostringstream text;
  text << "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    text << (d ? ", " : "") << t.size(d);
  }
  text << "]";
  return text.str();
}

DType dtype_of(const char* op, const Tensor& t) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return DType::Float;
    case ScalarType::Double:
      return DType::Double;
    case ScalarType::BFloat16:
      return DType::BFloat16;
    case ScalarType::Half:
      return DType::Half;
    default:
      STD_TORCH_CHECK(false, op, ": dtype must be float32, float64, bfloat16 or float16, got ",
                      torch::headeronly::toString(t.scalar_type()));
  }
  return DType::Float;
}

// `what` must have the shape and dtype of `x` (and live on the CPU).
void check_like(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  STD_TORCH_CHECK(t.is_cpu(), op, ": ", what, " must be a CPU tensor");
  STD_TORCH_CHECK(t.sizes().vec() == x.sizes().vec(), op, ": ", what, " must have shape ",
                  shape_of(x), ", got ", shape_of(t));
  STD_TORCH_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", what, " dtype (",
                  torch::headeronly::toString(t.scalar_type()), ") must match x (",
                  torch::headeronly::toString(x.scalar_type()), ")");
}

// x: [..., hidden], weight: [hidden], same dtype. Returns the dtype.
// x: [..., hidden]; weight and bias, when given: [hidden], x's dtype.
DType check_norm_args(const char* op, const Tensor& x, const std::optional<Tensor>& weight,
                      const std::optional<Tensor>& bias) {
  STD_TORCH_CHECK(x.is_cpu(), op, ": expected CPU tensors");
  const DType dtype = dtype_of(op, x);
  STD_TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a scalar");
  for (const auto& [name, t] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}}) {
    if (!t->has_value()) {
      continue;
    }
    const Tensor& p = t->value();
    STD_TORCH_CHECK(p.is_cpu(), op, ": ", name, " must be a CPU tensor");
    STD_TORCH_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", name,
                    " must have shape [", x.size(-1), "] (the last dimension of x ",
                    shape_of(x), "), got ", shape_of(p));
    STD_TORCH_CHECK(p.scalar_type() == x.scalar_type(), op, ": ", name, " dtype (",
                    torch::headeronly::toString(p.scalar_type()), ") must match x dtype (",
                    torch::headeronly::toString(x.scalar_type()), "); cast one of them");
  }
  return dtype;
}

std::optional<Tensor> contiguous_or_none(const std::optional<Tensor>& t) {
  if (!t.has_value()) {
    return std::nullopt;
  }
  return torch::stable::contiguous(t.value());
}

const void* data_or_null(const std::optional<Tensor>& t) {
  return t.has_value() ? t->const_data_ptr() : nullptr;
}

// Runs fn(dst) on `out` when contiguous, else on a contiguous staging tensor
// copied into `out` afterwards, so any `out` the caller owns is filled.
template <typename Fn>
void into(Tensor& out, const Tensor& like, const Fn& write_contiguous) {
  if (out.is_contiguous()) {
    write_contiguous(out);
    return;
  }
  Tensor staging = torch::stable::empty_like(like);
  write_contiguous(staging);
  torch::stable::copy_(out, staging);
}

int64_t row_grain(int64_t hidden) {
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(hidden, 1));
}

void run_forward(const Tensor& x, const std::optional<Tensor>& weight,
                 const std::optional<Tensor>& bias, Tensor& out, double eps, DType dtype) {
  const int64_t hidden = x.size(-1);
  const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
  if (rows == 0) {
    return;
  }
  ForwardArgs args{x.const_data_ptr(), data_or_null(weight), data_or_null(bias),
                   out.mutable_data_ptr(), hidden, eps, dtype};
  const KernelTable* table = active_table().load();
  torch::stable::parallel_for(0, rows, row_grain(hidden), [&](int64_t begin, int64_t end) {
    table->forward(args, begin, end);
  });
}

}  // namespace
}  // namespace layernorm_cpu

using namespace layernorm_cpu;

Tensor layer_norm(Tensor x, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
  const DType dtype = check_norm_args("layer_norm", x, weight, bias);
  const Tensor xc = torch::stable::contiguous(x);
  Tensor out = torch::stable::empty_like(xc);
  run_forward(xc, contiguous_or_none(weight), contiguous_or_none(bias), out, eps, dtype);
  return out;
}

void layer_norm_out(Tensor out, Tensor x, std::optional<Tensor> weight,
                    std::optional<Tensor> bias, double eps) {
  const DType dtype = check_norm_args("layer_norm", x, weight, bias);
  check_like("layer_norm", "out", out, x);
  const Tensor xc = torch::stable::contiguous(x);
  const std::optional<Tensor> wc = contiguous_or_none(weight);
  const std::optional<Tensor> bc = contiguous_or_none(bias);
  into(out, xc, [&](Tensor& dst) { run_forward(xc, wc, bc, dst, eps, dtype); });
}

// (grad_x, grad_weight, grad_bias); the last two are computed whether or not
// weight/bias were given (the caller drops them). Each block of rows adds into
// its own accumulators (one block per thread), summed in block order, so the
// result does not depend on thread timing.
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(Tensor grad_out, Tensor x,
                                                       std::optional<Tensor> weight,
                                                       std::optional<Tensor> bias, double eps) {
  const DType dtype = check_norm_args("layer_norm_backward", x, weight, bias);
  check_like("layer_norm_backward", "grad_out", grad_out, x);
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor gc = torch::stable::contiguous(grad_out);
  const std::optional<Tensor> wc = contiguous_or_none(weight);
  const int64_t hidden = xc.size(-1);
  const int64_t rows = hidden == 0 ? 0 : xc.numel() / hidden;
  Tensor grad_x = torch::stable::empty_like(xc);
  Tensor grad_w = torch::stable::new_empty(xc, {hidden});
  Tensor grad_b = torch::stable::new_empty(xc, {hidden});
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>(rows, torch::stable::get_num_threads()));
  const size_t acc_size = dtype == DType::Double ? sizeof(double) : sizeof(float);
  std::vector<unsigned char> partial(static_cast<size_t>(2 * blocks * hidden) * acc_size, 0);
  const KernelTable* table = active_table().load();
  BackwardArgs args{gc.const_data_ptr(), xc.const_data_ptr(), data_or_null(wc),
                    grad_x.mutable_data_ptr(), hidden, eps, dtype};
  if (rows > 0) {
    torch::stable::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      for (int64_t k = first; k < last; ++k) {
        table->backward(args, k * rows / blocks, (k + 1) * rows / blocks,
                        partial.data() + static_cast<size_t>(2 * k * hidden) * acc_size);
      }
    });
  }
  void* grad_w_data = grad_w.mutable_data_ptr();
  void* grad_b_data = grad_b.mutable_data_ptr();
  torch::stable::parallel_for(0, hidden, 4096, [&](int64_t begin, int64_t end) {
    table->reduce(partial.data(), blocks, hidden, grad_w_data, grad_b_data, dtype, begin, end);
  });
  return {grad_x, grad_w, grad_b};
}

std::string cpu_capability() {
  return active_table().load()->capability;
}

std::string set_cpu_capability(std::string capability) {
  const KernelTable* table = table_for(capability);
  STD_TORCH_CHECK(table != nullptr, "set_cpu_capability: '", capability,
                  "' loops are not available on this CPU/build; choose DEFAULT, AVX2, AVX512 or "
                  "AVX512_BF16 (this CPU runs up to ",
                  avx512_bf16_supported()
                      ? "AVX512_BF16"
                      : (avx512_supported() ? "AVX512" : (avx2_supported() ? "AVX2" : "DEFAULT")),
                  ")");
  return active_table().exchange(table)->capability;
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("layer_norm", TORCH_BOX(&layer_norm));
  ops.impl("layer_norm_out", TORCH_BOX(&layer_norm_out));
  ops.impl("layer_norm_backward", TORCH_BOX(&layer_norm_backward));
}

// Tensor-free ops have no device to dispatch on.
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, ops) {
  ops.impl("cpu_capability", TORCH_BOX(&cpu_capability));
  ops.impl("set_cpu_capability", TORCH_BOX(&set_cpu_capability));
}
