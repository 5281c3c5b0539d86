// The CPU ops: check arguments, bring the data into the layout the loops
// expect, and hand plain pointers to the vector loops for this CPU.
#include "../torch-ext/torch_binding.h"
#include "../activation_common/op_checks.h"
#include "kernels.h"

#include <ATen/Version.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>

namespace activation_cpu {
namespace {

// Whether the CPU has AVX512_BF16 (VCVTNE2PS2BF16), which torch's capability
// levels do not name.
bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// The best loops torch itself would use on this CPU (it honours the
// ATEN_CPU_CAPABILITY environment variable), limited to those compiled here;
// AVX512_BF16 is the AVX512 level on a CPU that also has AVX512_BF16.
const KernelTable* table_for(const std::string& capability) {
  const std::string torch_best = at::get_cpu_capability();
  const bool avx512_ok = torch_best == "AVX512";
  const bool avx2_ok = avx512_ok || torch_best == "AVX2";
  if (capability == "AVX512_BF16") {
    return avx512_ok && cpu_has_avx512_bf16() ? kernel_table_AVX512_BF16() : nullptr;
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

const KernelTable* best_table() {
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

void check_common(const char* op, const at::Tensor& out, const at::Tensor& input) {
  activation_common::check_tensors(op, out, input, c10::DeviceType::CPU, "CPU",
                                   {c10::kFloat, c10::kDouble, c10::kBFloat16, c10::kHalf},
                                   "float32, float64, bfloat16 or float16");
}

void run_gated(const char* op, at::Tensor& out, const at::Tensor& input, Activation act,
               bool act_on_second, double threshold = 0.0) {
  check_common(op, out, input);
  const int64_t d = activation_common::check_gated_shapes(op, out, input);
  const int64_t two_d = 2 * d;
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor x = input.contiguous();
  activation_common::into(out, [&](at::Tensor& dst) {
    GatedArgs args{dst.data_ptr(), x.const_data_ptr(), x.numel() / two_d, d, act,
                   act_on_second, static_cast<float>(threshold), x.scalar_type()};
    active_table().load()->gated(args);
  });
}

void run_unary(const char* op, at::Tensor& out, const at::Tensor& input, Activation act) {
  check_common(op, out, input);
  activation_common::check_unary_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor x = input.contiguous();
  activation_common::into(out, [&](at::Tensor& dst) {
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
              "' loops are not available on this CPU/build; choose DEFAULT, AVX2, AVX512 or "
              "AVX512_BF16 "
              "(at most what torch reports: ",
              at::get_cpu_capability(), ")");
  return activation_cpu::active_table().exchange(table)->capability;
}
