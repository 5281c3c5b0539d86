// The CPU ops: check arguments, describe each tensor as pointers and strides,
// split the rows over torch's threads and run the vector loops for this CPU.
// Only torch's stable ABI is used, so one build serves every torch >= 2.13.
#include "../torch-ext/torch_binding.h"
#include "kernels.h"
#include "../rotary_common/op_checks.h"

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using rotary_common::Table;
using rotary_common::unit_last_stride;

namespace rotary_cpu {
namespace {

// Below this many elements per thread, waking the pool costs more than it saves.
constexpr int64_t kGrainElements = 16384;

bool cpu_has(const char* capability) {
#if defined(__x86_64__) && defined(__GNUC__)
  const std::string c = capability;
  if (c == "AVX512") {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  if (c == "AVX2") {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }
#endif
  return std::string(capability) == "DEFAULT";
}

// ATEN_CPU_CAPABILITY caps the loops exactly as it caps torch's own kernels.
bool allowed_by_env(const std::string& capability) {
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  if (env == nullptr || *env == '\0') {
    return true;
  }
  std::string cap(env);
  std::transform(cap.begin(), cap.end(), cap.begin(), [](unsigned char ch) {
    return static_cast<char>(std::toupper(ch));
  });
  if (cap == "DEFAULT") {
    return capability == "DEFAULT";
  }
  if (cap == "AVX2") {
    return capability != "AVX512";
  }
  return true;
}

const KernelTable* table_for(const std::string& capability) {
  const KernelTable* table = nullptr;
  if (capability == "AVX512") {
    table = kernel_table_AVX512();
  } else if (capability == "AVX2") {
    table = kernel_table_AVX2();
  } else if (capability == "DEFAULT") {
    table = kernel_table_DEFAULT();
  }
  if (table == nullptr || !cpu_has(capability.c_str()) || !allowed_by_env(capability)) {
    return nullptr;
  }
  return table;
}

std::atomic<const KernelTable*>& active_table() {
  static std::atomic<const KernelTable*> table{[] {
    for (const char* capability : {"AVX512", "AVX2"}) {
      if (const KernelTable* t = table_for(capability)) {
        return t;
      }
    }
    return kernel_table_DEFAULT();
  }()};
  return table;
}

DType to_dtype(const char* op, ScalarType type) {
  switch (type) {
    case ScalarType::Float:
      return DType::Float32;
    case ScalarType::Double:
      return DType::Float64;
    case ScalarType::BFloat16:
      return DType::BFloat16;
    case ScalarType::Half:
      return DType::Float16;
    default:
      STD_TORCH_CHECK(false, op, ": dtype must be float32, float64, bfloat16 or float16");
  }
  return DType::Float32;
}

const void* offset(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.data_ptr()) + elements * static_cast<int64_t>(t.element_size());
}

Operand table_operand(const Tensor& t, int64_t first) {
  const bool batched = t.dim() == 3 && t.size(0) > 1;
  return Operand{offset(t, first), {batched ? t.stride(0) : 0, 0, t.stride(-2)}};
}

Operand head_operand(const Tensor& t, int64_t first) {
  return Operand{offset(t, first), {t.stride(0), t.stride(1), t.stride(2)}};
}

// y = rotate(x); y may be x (in place). Columns past `rot` are copied when
// y is another tensor, so the result is whole either way.
void rotate(const char* op, const Tensor& x, Tensor y, const Table& table, bool conj) {
  STD_TORCH_CHECK(unit_last_stride(x) && unit_last_stride(y), op,
                  ": tensors must have unit stride in head_dim (the last dimension); call "
                  ".contiguous() first");
  if (x.numel() == 0) {
    return;
  }
  const int64_t head_dim = x.size(3);
  const int64_t half = table.rot / 2;
  if (y.data_ptr() != x.data_ptr() && table.rot < head_dim) {
    Tensor tail = torch::stable::narrow(y, 3, table.rot, head_dim - table.rot);
    Tensor src = x;
    torch::stable::copy_(tail, torch::stable::narrow(src, 3, table.rot, head_dim - table.rot));
  }
  if (half == 0) {
    return;
  }
  const RotaryArgs args{
      {x.size(0), x.size(1), x.size(2)},
      half,
      head_operand(x, 0),
      head_operand(x, half),
      table_operand(table.cos, 0),
      table_operand(table.cos, half),
      table_operand(table.sin, 0),
      table_operand(table.sin, half),
      head_operand(y, 0),
      head_operand(y, half),
      conj,
      to_dtype(op, x.scalar_type()),
  };
  const KernelTable* kernels = active_table().load();
  const int64_t rows = args.size[0] * args.size[1] * args.size[2];
  const int64_t grain = std::max<int64_t>(1, kGrainElements / table.rot);
  torch::stable::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    kernels->rotate(args, begin, end);
  });
}

}  // namespace
}  // namespace rotary_cpu

using namespace rotary_cpu;

void apply_rotary(Tensor q, Tensor k, Tensor cos, Tensor sin) {
  const char* op = "apply_rotary";
  STD_TORCH_CHECK(q.is_cpu(), op, ": q must be a CPU tensor");
  rotary_common::check_head_tensor(op, "CPU", "q", q, q);
  rotary_common::check_head_tensor(op, "CPU", "k", k, q);
  to_dtype(op, q.scalar_type());
  const Table table = rotary_common::check_table(op, "CPU", q, cos, sin);
  STD_TORCH_CHECK(table.rot <= k.size(3), op, ": cos is wider than k's head_dim");
  rotate(op, q, q, table, false);
  rotate(op, k, k, table, false);
}

void apply_rotary_out(Tensor q_out, Tensor k_out, Tensor q, Tensor k, Tensor cos, Tensor sin,
                      bool conj) {
  const char* op = "apply_rotary_out";
  STD_TORCH_CHECK(q.is_cpu(), op, ": q must be a CPU tensor");
  rotary_common::check_head_tensor(op, "CPU", "q", q, q);
  rotary_common::check_head_tensor(op, "CPU", "k", k, q);
  to_dtype(op, q.scalar_type());
  rotary_common::check_out(op, "CPU", "q_out", q_out, q);
  rotary_common::check_out(op, "CPU", "k_out", k_out, k);
  const Table table = rotary_common::check_table(op, "CPU", q, cos, sin);
  STD_TORCH_CHECK(table.rot <= k.size(3), op, ": cos is wider than k's head_dim");
  rotate(op, unit_last_stride(q) ? q : torch::stable::contiguous(q), q_out, table, conj);
  rotate(op, unit_last_stride(k) ? k : torch::stable::contiguous(k), k_out, table, conj);
}

std::tuple<Tensor, Tensor> rotary(Tensor q, Tensor k, Tensor cos, Tensor sin, bool conj) {
  const char* op = "rotary";
  STD_TORCH_CHECK(q.is_cpu(), op, ": q must be a CPU tensor");
  rotary_common::check_head_tensor(op, "CPU", "q", q, q);
  rotary_common::check_head_tensor(op, "CPU", "k", k, q);
  to_dtype(op, q.scalar_type());
  const Table table = rotary_common::check_table(op, "CPU", q, cos, sin);
  STD_TORCH_CHECK(table.rot <= k.size(3), op, ": cos is wider than k's head_dim");
  // A fresh result keeps the input's layout (empty_like), so a transposed view
  // in gives the same view layout out, as eager arithmetic would.
  const Tensor q_src = unit_last_stride(q) ? q : torch::stable::contiguous(q);
  const Tensor k_src = unit_last_stride(k) ? k : torch::stable::contiguous(k);
  Tensor q_out = torch::stable::empty_like(q_src);
  Tensor k_out = torch::stable::empty_like(k_src);
  rotate(op, q_src, q_out, table, conj);
  rotate(op, k_src, k_out, table, conj);
  return {q_out, k_out};
}

std::string cpu_capability() {
  return active_table().load()->capability;
}

std::string set_cpu_capability(std::string capability) {
  const KernelTable* table = table_for(capability);
  STD_TORCH_CHECK(table != nullptr, "set_cpu_capability: '", capability,
                  "' loops are not available on this CPU/build (or are excluded by "
                  "ATEN_CPU_CAPABILITY); choose DEFAULT, AVX2 or AVX512");
  return active_table().exchange(table)->capability;
}
