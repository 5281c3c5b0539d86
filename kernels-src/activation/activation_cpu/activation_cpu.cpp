// The CPU ops: check arguments, bring the data into the layout the loops
// expect, and hand plain pointers to the vector loops for this CPU.
#include "../torch-ext/torch_binding.h"
#include "kernels.h"

#include <ATen/Version.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>
#include <vector>

namespace activation_cpu {
namespace {

bool is_supported_dtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kDouble || dtype == c10::kBFloat16 ||
         dtype == c10::kHalf;
}

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

void check_common(const char* op, const at::Tensor& out, const at::Tensor& input) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(), op,
              ": expected CPU tensors, got input on ", input.device(), " and out on ",
              out.device());
  TORCH_CHECK(is_supported_dtype(input.scalar_type()), op,
              ": input dtype must be float32, float64, bfloat16 or float16, got ",
              input.scalar_type());
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), op, ": out dtype (",
              out.scalar_type(), ") must match input dtype (", input.scalar_type(), ")");
}

// The loops write a contiguous buffer; a strided `out` gets the result copied
// in afterwards, so any `out` the caller owns is filled correctly.
template <typename Fn>
void into(at::Tensor& out, const Fn& write_contiguous) {
  if (out.is_contiguous()) {
    write_contiguous(out);
    return;
  }
  at::Tensor staging = out.contiguous();
  write_contiguous(staging);
  out.copy_(staging);
}

void run_gated(const char* op, at::Tensor& out, const at::Tensor& input, Activation act,
               bool act_on_second, double threshold = 0.0) {
  check_common(op, out, input);
  TORCH_CHECK(input.dim() >= 1, op, ": input must have at least one dimension, got a scalar");
  const int64_t two_d = input.size(-1);
  TORCH_CHECK(two_d % 2 == 0, op, ": the last dimension of input must be even ([..., 2*d]), got ",
              input.sizes());
  const int64_t d = two_d / 2;
  std::vector<int64_t> expected(input.sizes().begin(), input.sizes().end());
  expected.back() = d;
  TORCH_CHECK(out.sizes() == c10::IntArrayRef(expected), op, ": out must have shape ",
              c10::IntArrayRef(expected), " (input ", input.sizes(),
              " with the last dimension halved), got ", out.sizes());
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor x = input.contiguous();
  into(out, [&](at::Tensor& dst) {
    GatedArgs args{dst.data_ptr(), x.const_data_ptr(), x.numel() / two_d, d, act,
                   act_on_second, static_cast<float>(threshold), x.scalar_type()};
    active_table().load()->gated(args);
  });
}

void run_unary(const char* op, at::Tensor& out, const at::Tensor& input, Activation act) {
  check_common(op, out, input);
  TORCH_CHECK(out.sizes() == input.sizes(), op, ": out must have the shape of input ",
              input.sizes(), ", got ", out.sizes());
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor x = input.contiguous();
  into(out, [&](at::Tensor& dst) {
    UnaryArgs args{dst.data_ptr(), x.const_data_ptr(), x.numel(), act, x.scalar_type()};
    active_table().load()->unary(args);
  });
}

}  // namespace
}  // namespace activation_cpu

using activation_cpu::Activation;

void silu_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_gated("silu_and_mul", out, input, Activation::Silu, false);
}

void mul_and_silu(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_gated("mul_and_silu", out, input, Activation::Silu, true);
}

void gelu_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_gated("gelu_and_mul", out, input, Activation::Gelu, false);
}

void gelu_tanh_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_gated("gelu_tanh_and_mul", out, input, Activation::GeluTanh, false);
}

void fatrelu_and_mul(at::Tensor& out, const at::Tensor& input, double threshold) {
  activation_cpu::run_gated("fatrelu_and_mul", out, input, Activation::FatRelu, false,
                            threshold);
}

void silu(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_unary("silu", out, input, Activation::Silu);
}

void gelu(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_unary("gelu", out, input, Activation::Gelu);
}

void gelu_tanh(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_unary("gelu_tanh", out, input, Activation::GeluTanh);
}

// gelu_fast and gelu_new are the tanh approximation written two other ways;
// they are the same function, so they share its loop.
void gelu_fast(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_unary("gelu_fast", out, input, Activation::GeluTanh);
}

void gelu_new(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_unary("gelu_new", out, input, Activation::GeluTanh);
}

void gelu_quick(at::Tensor& out, const at::Tensor& input) {
  activation_cpu::run_unary("gelu_quick", out, input, Activation::GeluQuick);
}

std::string cpu_capability() {
  return activation_cpu::active_table().load()->capability;
}

std::string set_cpu_capability(const std::string& capability) {
  const activation_cpu::KernelTable* table = activation_cpu::table_for(capability);
  TORCH_CHECK(table != nullptr, "set_cpu_capability: '", capability,
              "' loops are not available on this CPU/build; choose DEFAULT, AVX2 or AVX512 "
              "(at most what torch reports: ",
              at::get_cpu_capability(), ")");
  return activation_cpu::active_table().exchange(table)->capability;
}
