// The CPU ops: check arguments, bring tensors into the contiguous layout the
// loops expect, split the work over torch's intra-op threads and hand plain
// pointers to the loop copy chosen for this CPU. Only torch's stable ABI is
// used, so one build loads on torch 2.13 and every later torch.
#include "kernels.h"
#include "op_args.h"
#include "registration.h"

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace rmsnorm_cpu {
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

using rmsnorm_common::rows_of;
using rmsnorm_common::shape_of;

DType dtype_of(const char* op, const Tensor& t) {
  return rmsnorm_common::dtype_of<DType>(op, t);
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.strides().vec() == b.strides().vec();
}

// `what` must have the shape and dtype of `x` (and live on the CPU).
void check_like(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  STD_TORCH_CHECK(t.is_cpu(), op, ": ", what, " must be a CPU tensor");
  rmsnorm_common::check_shape_dtype(op, what, t, x);
}

// x: [..., hidden], weight: [hidden], same dtype. Returns the dtype.
DType check_norm_args(const char* op, const Tensor& x, const Tensor& weight) {
  STD_TORCH_CHECK(x.is_cpu() && weight.is_cpu(), op, ": expected CPU tensors");
  return rmsnorm_common::check_norm_shapes<DType>(op, x, weight);
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

void run_forward(const Tensor& x, const Tensor& residual, const Tensor& weight, Tensor& out,
                 Tensor* sum, double eps, bool unit_offset, DType dtype) {
  const int64_t hidden = x.size(-1);
  const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
  if (rows == 0) {
    return;
  }
  ForwardArgs args{x.const_data_ptr(),
                   residual.defined() ? residual.const_data_ptr() : nullptr,
                   weight.const_data_ptr(),
                   out.mutable_data_ptr(),
                   sum != nullptr ? sum->mutable_data_ptr() : nullptr,
                   hidden,
                   eps,
                   unit_offset,
                   dtype};
  const KernelTable* table = active_table().load();
  torch::stable::parallel_for(0, rows, row_grain(hidden), [&](int64_t begin, int64_t end) {
    table->forward(args, begin, end);
  });
}

}  // namespace
}  // namespace rmsnorm_cpu

using namespace rmsnorm_cpu;

void rms_norm_out(Tensor out, Tensor x, Tensor weight, double eps, bool unit_offset) {
  const DType dtype = check_norm_args("rms_norm", x, weight);
  check_like("rms_norm", "out", out, x);
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  into(out, xc, [&](Tensor& dst) {
    run_forward(xc, Tensor(), wc, dst, nullptr, eps, unit_offset, dtype);
  });
}

Tensor rms_norm(Tensor x, Tensor weight, double eps, bool unit_offset) {
  const DType dtype = check_norm_args("rms_norm", x, weight);
  const Tensor xc = torch::stable::contiguous(x);
  Tensor out = torch::stable::empty_like(xc);
  run_forward(xc, Tensor(), torch::stable::contiguous(weight), out, nullptr, eps, unit_offset,
              dtype);
  return out;
}

// residual <- x + residual; out <- rms_norm(residual).
void fused_add_rms_norm_out(Tensor out, Tensor x, Tensor residual, Tensor weight, double eps) {
  const DType dtype = check_norm_args("fused_add_rms_norm", x, weight);
  check_like("fused_add_rms_norm", "residual", residual, x);
  check_like("fused_add_rms_norm", "out", out, x);
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor wc = torch::stable::contiguous(weight);
  Tensor sum = torch::stable::contiguous(residual);
  into(out, xc, [&](Tensor& dst) {
    run_forward(xc, sum, wc, dst, &sum, eps, false, dtype);
  });
  if (!same_tensor(sum, residual)) {
    torch::stable::copy_(residual, sum);
  }
}

Tensor fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, double eps) {
  Tensor out = torch::stable::empty_like(torch::stable::contiguous(x));
  fused_add_rms_norm_out(out, x, residual, weight, eps);
  return out;
}

// The functional form autograd differentiates: (rms_norm(x + residual), x + residual).
std::tuple<Tensor, Tensor> add_rms_norm(Tensor x, Tensor residual, Tensor weight, double eps) {
  const DType dtype = check_norm_args("add_rms_norm", x, weight);
  check_like("add_rms_norm", "residual", residual, x);
  const Tensor xc = torch::stable::contiguous(x);
  Tensor out = torch::stable::empty_like(xc);
  Tensor sum = torch::stable::empty_like(xc);
  run_forward(xc, torch::stable::contiguous(residual), torch::stable::contiguous(weight), out,
              &sum, eps, false, dtype);
  return {out, sum};
}

void add_rms_norm_out(Tensor out, Tensor sum, Tensor x, Tensor residual, Tensor weight,
                      double eps) {
  const DType dtype = check_norm_args("add_rms_norm", x, weight);
  check_like("add_rms_norm", "residual", residual, x);
  check_like("add_rms_norm", "out", out, x);
  check_like("add_rms_norm", "sum", sum, x);
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor rc = torch::stable::contiguous(residual);
  const Tensor wc = torch::stable::contiguous(weight);
  into(sum, xc, [&](Tensor& sum_dst) {
    into(out, xc, [&](Tensor& dst) { run_forward(xc, rc, wc, dst, &sum_dst, eps, false, dtype); });
  });
}

namespace {

// Both backwards: grad_weight sums over rows, so each block of rows (one block per
// thread) adds into its own accumulators, which are then summed in block order, and the
// result does not depend on thread timing. `rows_into(first, last, partial)` runs one
// block.
template <typename RowsInto>
void backward_rows(const KernelTable* table, int64_t rows, int64_t hidden, DType dtype,
                   Tensor& grad_w, RowsInto rows_into) {
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>(rows, torch::stable::get_num_threads()));
  const size_t acc_size = dtype == DType::Double ? sizeof(double) : sizeof(float);
  std::vector<unsigned char> partial(static_cast<size_t>(blocks * hidden) * acc_size, 0);
  if (rows > 0) {
    torch::stable::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      for (int64_t k = first; k < last; ++k) {
        rows_into(k * rows / blocks, (k + 1) * rows / blocks,
                  partial.data() + static_cast<size_t>(k * hidden) * acc_size);
      }
    });
  }
  void* grad_w_data = grad_w.mutable_data_ptr();
  torch::stable::parallel_for(0, hidden, 4096, [&](int64_t begin, int64_t end) {
    table->reduce(partial.data(), blocks, hidden, grad_w_data, dtype, begin, end);
  });
}

}  // namespace

// (grad_x, grad_weight), grad_weight summed as backward_rows says.
std::tuple<Tensor, Tensor> rms_norm_backward(Tensor grad_out, Tensor x, Tensor weight, double eps,
                                             bool unit_offset) {
  const DType dtype = check_norm_args("rms_norm_backward", x, weight);
  check_like("rms_norm_backward", "grad_out", grad_out, x);
  auto [xc, gc, wc, grad_x, grad_w, hidden, rows] =
      rmsnorm_common::backward_tensors(grad_out, x, weight);
  const KernelTable* table = active_table().load();
  BackwardArgs args{gc.const_data_ptr(), xc.const_data_ptr(), wc.const_data_ptr(),
                    grad_x.mutable_data_ptr(), hidden, eps, unit_offset, dtype};
  backward_rows(table, rows, hidden, dtype, grad_w,
                [&](int64_t first, int64_t last, void* partial) {
                  table->backward(args, first, last, partial);
                });
  return {grad_x, grad_w};
}

void silu_mul_out(Tensor out, Tensor gate, Tensor up) {
  const DType dtype = dtype_of("silu_mul", gate);
  STD_TORCH_CHECK(gate.is_cpu(), "silu_mul: expected CPU tensors");
  check_like("silu_mul", "up", up, gate);
  check_like("silu_mul", "out", out, gate);
  const Tensor gc = torch::stable::contiguous(gate);
  const Tensor uc = torch::stable::contiguous(up);
  const KernelTable* table = active_table().load();
  into(out, gc, [&](Tensor& dst) {
    SiluMulArgs args{gc.const_data_ptr(), uc.const_data_ptr(), dst.mutable_data_ptr(), dtype};
    torch::stable::parallel_for(0, gc.numel(), kGrainElements, [&](int64_t begin, int64_t end) {
      table->silu_mul(args, begin, end);
    });
  });
}

Tensor silu_mul(Tensor gate, Tensor up) {
  Tensor out = torch::stable::empty_like(torch::stable::contiguous(gate));
  silu_mul_out(out, gate, up);
  return out;
}

// A weight [rows, cols] of x's dtype (nn.Linear's layout).
void check_weight(const char* op, const char* what, const Tensor& w, const Tensor& x,
                  int64_t rows, int64_t cols) {
  STD_TORCH_CHECK(w.is_cpu(), op, ": ", what, " must be a CPU tensor");
  STD_TORCH_CHECK(w.dim() == 2 && w.size(0) == rows && w.size(1) == cols, op, ": ", what,
                  " must have shape [", rows, ", ", cols, "], got ", shape_of(w));
  STD_TORCH_CHECK(w.scalar_type() == x.scalar_type(), op, ": ", what, " dtype (",
                  torch::headeronly::toString(w.scalar_type()), ") must match x (",
                  torch::headeronly::toString(x.scalar_type()), ")");
}

// down(silu(x w_gate^T) * (x w_up^T)) (+ residual), every weight streamed once for
// all rows of x: the decode step of a SwiGLU MLP in one op (see MlpArgs).
Tensor swiglu_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down,
                  std::optional<Tensor> residual) {
  STD_TORCH_CHECK(x.is_cpu(), "swiglu_mlp: expected CPU tensors");
  const DType dtype = dtype_of("swiglu_mlp", x);
  STD_TORCH_CHECK(x.dim() >= 1, "swiglu_mlp: x must have at least one dimension");
  const int64_t hidden = x.size(-1);
  const int64_t inter = w_gate.dim() == 2 ? w_gate.size(0) : -1;
  check_weight("swiglu_mlp", "w_gate", w_gate, x, inter, hidden);
  check_weight("swiglu_mlp", "w_up", w_up, x, inter, hidden);
  check_weight("swiglu_mlp", "w_down", w_down, x, hidden, inter);
  const Tensor xc = torch::stable::contiguous(x);
  Tensor out = torch::stable::empty_like(xc);
  Tensor rc;
  if (residual.has_value()) {
    check_like("swiglu_mlp", "residual", *residual, x);
    rc = torch::stable::contiguous(*residual);
  }
  const int64_t rows = hidden == 0 ? 0 : xc.numel() / hidden;
  if (rows == 0 || inter == 0) {
    if (rows > 0) {  // no intermediate features: the projection is zero
      torch::stable::zero_(out);
      if (rc.defined()) {
        torch::stable::copy_(out, rc);
      }
    }
    return out;
  }
  const Tensor wg = torch::stable::contiguous(w_gate);
  const Tensor wu = torch::stable::contiguous(w_up);
  const Tensor wd = torch::stable::contiguous(w_down);
  const size_t acc_size = dtype == DType::Double ? sizeof(double) : sizeof(float);
  std::vector<unsigned char> act(static_cast<size_t>(rows * inter) * acc_size);
  MlpArgs args{xc.const_data_ptr(), wg.const_data_ptr(), wu.const_data_ptr(),
               wd.const_data_ptr(), rc.defined() ? rc.const_data_ptr() : nullptr,
               act.data(),          out.mutable_data_ptr(), rows, hidden, inter, dtype};
  const KernelTable* table = active_table().load();
  // Each task streams at least kGrainElements weights per row of x.
  torch::stable::parallel_for(0, inter, row_grain(hidden * rows), [&](int64_t begin, int64_t end) {
    table->mlp_gate_up(args, begin, end);
  });
  torch::stable::parallel_for(0, hidden, row_grain(inter * rows), [&](int64_t begin, int64_t end) {
    table->mlp_down(args, begin, end);
  });
  return out;
}

// x weight^T (+ bias) (+ residual) in the compute type, rounded once, each weight row
// streamed once for all rows of x: a decode step's projection (see LinearArgs). Any
// number of rows is correct; it is built for the few rows a bandwidth-bound product has.
Tensor linear(Tensor x, Tensor weight, std::optional<Tensor> bias,
              std::optional<Tensor> residual) {
  STD_TORCH_CHECK(x.is_cpu(), "linear: expected CPU tensors");
  const DType dtype = dtype_of("linear", x);
  STD_TORCH_CHECK(x.dim() >= 1, "linear: x must have at least one dimension");
  const int64_t in = x.size(-1);
  const int64_t features = weight.dim() == 2 ? weight.size(0) : -1;
  check_weight("linear", "weight", weight, x, features, in);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = features;
  const Tensor xc = torch::stable::contiguous(x);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    rows *= shape[d];
  }
  Tensor bc;
  if (bias.has_value()) {
    STD_TORCH_CHECK(bias->is_cpu(), "linear: bias must be a CPU tensor");
    STD_TORCH_CHECK(bias->dim() == 1 && bias->size(0) == features, "linear: bias must have shape [",
                    features, "], got ", shape_of(*bias));
    STD_TORCH_CHECK(bias->scalar_type() == x.scalar_type(), "linear: bias dtype (",
                    torch::headeronly::toString(bias->scalar_type()), ") must match x (",
                    torch::headeronly::toString(x.scalar_type()), ")");
    bc = torch::stable::contiguous(*bias);
  }
  Tensor out = torch::stable::new_empty(xc, shape);
  Tensor rc;
  if (residual.has_value()) {
    check_like("linear", "residual", *residual, out);
    rc = torch::stable::contiguous(*residual);
  }
  if (rows == 0 || features == 0) {
    return out;
  }
  // in == 0 needs no case of its own: the loops' sums are then zero, and bias and
  // residual are added as usual (F.linear's result).
  const Tensor wc = torch::stable::contiguous(weight);
  LinearArgs args{xc.const_data_ptr(),
                  wc.const_data_ptr(),
                  bc.defined() ? bc.const_data_ptr() : nullptr,
                  rc.defined() ? rc.const_data_ptr() : nullptr,
                  out.mutable_data_ptr(),
                  rows,
                  in,
                  features,
                  dtype};
  const KernelTable* table = active_table().load();
  // Each task streams at least kGrainElements weights per row of x.
  torch::stable::parallel_for(0, features, row_grain(in * rows), [&](int64_t begin, int64_t end) {
    table->linear(args, begin, end);
  });
  return out;
}

// What both gated ops check and derive from (x, group_size, activation): the row
// length, the group the norm runs over (0 means the whole row) and the gate function.
namespace {

struct GatedShape {
  int64_t hidden;
  int64_t group;
  Activation activation;
};

GatedShape check_gated_args(const char* op, const Tensor& x, int64_t group_size,
                            const std::string& activation) {
  STD_TORCH_CHECK(activation == "silu" || activation == "sigmoid", op,
                  ": activation must be 'silu' or 'sigmoid', got '", activation, "'");
  const int64_t hidden = x.size(-1);
  const int64_t group = group_size == 0 ? hidden : group_size;
  STD_TORCH_CHECK(group > 0 ? hidden % group == 0 : hidden == 0, op, ": group_size ",
                  group_size, " must divide the last dimension of x (", hidden, ")");
  return {hidden, group, activation == "silu" ? Activation::Silu : Activation::Sigmoid};
}

}  // namespace

// The gated norm (GatedArgs): x [..., hidden], gate like x or None, weight
// [hidden] of x's dtype, group_size dividing hidden (0: the whole row).
Tensor rms_norm_gated(Tensor x, std::optional<Tensor> gate, Tensor weight, double eps,
                      int64_t group_size, bool norm_before_gate, std::string activation) {
  const char* op = "rms_norm_gated";
  const DType dtype = check_norm_args(op, x, weight);
  const GatedShape shape = check_gated_args(op, x, group_size, activation);
  const int64_t hidden = shape.hidden;
  const int64_t group = shape.group;
  const Tensor xc = torch::stable::contiguous(x);
  Tensor gc;
  if (gate.has_value()) {
    check_like(op, "gate", *gate, x);
    gc = torch::stable::contiguous(*gate);
  }
  const Tensor wc = torch::stable::contiguous(weight);
  Tensor out = torch::stable::empty_like(xc);
  const int64_t rows = hidden == 0 ? 0 : xc.numel() / hidden;
  if (rows == 0) {
    return out;
  }
  GatedArgs args{xc.const_data_ptr(),
                 gc.defined() ? gc.const_data_ptr() : nullptr,
                 wc.const_data_ptr(),
                 out.mutable_data_ptr(),
                 hidden,
                 group,
                 eps,
                 norm_before_gate,
                 shape.activation,
                 dtype};
  const KernelTable* table = active_table().load();
  torch::stable::parallel_for(0, rows, row_grain(hidden), [&](int64_t begin, int64_t end) {
    table->gated(args, begin, end);
  });
  return out;
}

// The gated norm's gradients: (grad_x, grad_gate, grad_weight), grad_gate
// empty without a gate. grad_weight sums over rows in per-block accumulators
// added in block order, as rms_norm_backward does.
std::tuple<Tensor, Tensor, Tensor> rms_norm_gated_backward(
    Tensor grad_out, Tensor x, std::optional<Tensor> gate, Tensor weight, double eps,
    int64_t group_size, bool norm_before_gate, std::string activation) {
  const char* op = "rms_norm_gated_backward";
  const DType dtype = check_norm_args(op, x, weight);
  check_like(op, "grad_out", grad_out, x);
  const GatedShape shape = check_gated_args(op, x, group_size, activation);
  const int64_t hidden = shape.hidden;
  const int64_t group = shape.group;
  const Tensor xc = torch::stable::contiguous(x);
  const Tensor dyc = torch::stable::contiguous(grad_out);
  const Tensor wc = torch::stable::contiguous(weight);
  Tensor gc;
  Tensor grad_gate;
  if (gate.has_value()) {
    check_like(op, "gate", *gate, x);
    gc = torch::stable::contiguous(*gate);
    grad_gate = torch::stable::empty_like(xc);
  } else {
    grad_gate = torch::stable::new_empty(xc, {0});
  }
  Tensor grad_x = torch::stable::empty_like(xc);
  Tensor grad_w = torch::stable::empty_like(wc);
  const int64_t rows = hidden == 0 ? 0 : xc.numel() / hidden;
  const KernelTable* table = active_table().load();
  GatedBackwardArgs args{dyc.const_data_ptr(),
                         xc.const_data_ptr(),
                         gc.defined() ? gc.const_data_ptr() : nullptr,
                         wc.const_data_ptr(),
                         grad_x.mutable_data_ptr(),
                         gc.defined() ? grad_gate.mutable_data_ptr() : nullptr,
                         hidden,
                         group,
                         eps,
                         norm_before_gate,
                         shape.activation,
                         dtype};
  backward_rows(table, rows, hidden, dtype, grad_w,
                [&](int64_t first, int64_t last, void* partial) {
                  table->gated_backward(args, first, last, partial);
                });
  return {grad_x, grad_gate, grad_w};
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
  ops.impl("rms_norm", TORCH_BOX(&rms_norm));
  ops.impl("rms_norm_out", TORCH_BOX(&rms_norm_out));
  ops.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward));
  ops.impl("fused_add_rms_norm", TORCH_BOX(&fused_add_rms_norm));
  ops.impl("fused_add_rms_norm_out", TORCH_BOX(&fused_add_rms_norm_out));
  ops.impl("add_rms_norm", TORCH_BOX(&add_rms_norm));
  ops.impl("add_rms_norm_out", TORCH_BOX(&add_rms_norm_out));
  ops.impl("silu_mul", TORCH_BOX(&silu_mul));
  ops.impl("silu_mul_out", TORCH_BOX(&silu_mul_out));
  ops.impl("swiglu_mlp", TORCH_BOX(&swiglu_mlp));
  ops.impl("linear", TORCH_BOX(&linear));
  ops.impl("rms_norm_gated", TORCH_BOX(&rms_norm_gated));
  ops.impl("rms_norm_gated_backward", TORCH_BOX(&rms_norm_gated_backward));
}

// Tensor-free ops have no device to dispatch on.
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, ops) {
  ops.impl("cpu_capability", TORCH_BOX(&cpu_capability));
  ops.impl("set_cpu_capability", TORCH_BOX(&set_cpu_capability));
}
