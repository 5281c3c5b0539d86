// The boundary between the op layer (rmsnorm_cpu.cpp: validation, allocation,
// threads, CPU dispatch) and the loops (kernels_impl.h), which are compiled
// once per CPU capability (kernels_{default,avx2,avx512}.cpp). Only plain data
// crosses it: the loop copies include no torch header, so no torch inline
// function is ever compiled for AVX-512 and picked by the linker for a CPU
// without it.
#pragma once

#include <cstdint>

namespace rmsnorm_cpu {

enum class DType { Float, Double, BFloat16, Half };

// y = x * rstd * w per row of `hidden` elements, rstd = 1/sqrt(mean(x^2) + eps).
// With `residual`, the normalized value is s = x + residual (rounded to the
// dtype), and s is written to `sum` (which may be `residual` itself).
// unit_offset (Gemma): y = round(x * rstd * (1 + w)), computed in float and
// rounded once; otherwise reduced-precision inputs follow Llama exactly:
// y = round(w * round(x * rstd)).
struct ForwardArgs {
  const void* x;
  const void* residual;  // nullptr: plain rms_norm
  const void* weight;
  void* out;
  void* sum;  // with residual only
  int64_t hidden;
  double eps;
  bool unit_offset;
  DType dtype;
};

// grad_x of the rows, and this block's share of grad_w added into `partial`
// (`hidden` accumulators: float, or double for float64).
struct BackwardArgs {
  const void* grad_out;
  const void* x;
  const void* weight;
  void* grad_x;
  int64_t hidden;
  double eps;
  bool unit_offset;
  DType dtype;
};

// out[i] = silu(gate[i]) * up[i].
struct SiluMulArgs {
  const void* gate;
  const void* up;
  void* out;
  DType dtype;
};

// A SwiGLU MLP for a few rows (a decode step): out = down(silu(gate) * up)
// (+ residual), gate = x w_gate^T, up = x w_up^T, every weight read once per
// call for all rows. Products are rounded to the dtype where PyTorch's
// matmuls would round them (gate, up, the down projection, the residual sum),
// silu(gate) * up as silu_mul rounds it (once).
struct MlpArgs {
  const void* x;         // [rows, hidden]
  const void* w_gate;    // [inter, hidden]
  const void* w_up;      // [inter, hidden]
  const void* w_down;    // [hidden, inter]
  const void* residual;  // [rows, hidden] or nullptr
  void* act;             // [rows, inter] in the dtype: silu(gate) * up
  void* out;             // [rows, hidden]
  int64_t rows;
  int64_t hidden;
  int64_t inter;
  DType dtype;
};

// out = x weight^T (+ bias) (+ residual) for a few rows (a decode step's projection):
// each weight row streamed once for all rows of x, the sum of product, bias and
// residual accumulated in the compute type (float for 16-bit types) and rounded once.
struct LinearArgs {
  const void* x;         // [rows, in]
  const void* weight;    // [features, in]
  const void* bias;      // [features] or nullptr
  const void* residual;  // [rows, features] or nullptr
  void* out;             // [rows, features]
  int64_t rows;
  int64_t in;
  int64_t features;
  DType dtype;
};

// The gated norm of gated delta nets and Mamba-2 mixers, over groups of
// `group` columns (group == hidden: the whole row), in float, rounded once:
//   norm_before_gate: y = w * v * rstd(v) * act(gate), v = x;
//   otherwise:        y = w * v * rstd(v),            v = x * act(gate).
// gate == nullptr: y = w * x * rstd(x). act is silu or sigmoid.
enum class Activation { Silu, Sigmoid };
struct GatedArgs {
  const void* x;
  const void* gate;  // nullptr: no gate
  const void* weight;
  void* out;
  int64_t hidden;
  int64_t group;
  double eps;
  bool norm_before_gate;
  Activation activation;
  DType dtype;
};

// The gated norm's gradients (the forward's GatedArgs settings): grad_x and
// grad_gate (nullptr without a gate) of the rows, and the rows' share of
// grad_weight added into `partial` (`hidden` accumulators: float, or double
// for float64), all computed in float and rounded once.
struct GatedBackwardArgs {
  const void* grad_out;
  const void* x;
  const void* gate;  // nullptr: no gate
  const void* weight;
  void* grad_x;
  void* grad_gate;  // nullptr exactly when gate is
  int64_t hidden;
  int64_t group;
  double eps;
  bool norm_before_gate;
  Activation activation;
  DType dtype;
};

// One set of loops, compiled for one CPU capability. Each entry handles a
// range [begin, end) of rows (forward/backward), columns (reduce),
// elements (silu_mul) or weight rows (mlp_*), so the op layer owns the threads.
struct KernelTable {
  const char* capability;
  void (*forward)(const ForwardArgs&, int64_t begin, int64_t end);
  void (*backward)(const BackwardArgs&, int64_t begin, int64_t end, void* partial);
  // grad_w[c] = sum over `blocks` rows of partial[k * hidden + c], rounded to dtype.
  void (*reduce)(const void* partial, int64_t blocks, int64_t hidden, void* grad_w, DType dtype,
                 int64_t begin, int64_t end);
  void (*silu_mul)(const SiluMulArgs&, int64_t begin, int64_t end);
  // act[:, begin:end] from rows [begin, end) of w_gate and w_up.
  void (*mlp_gate_up)(const MlpArgs&, int64_t begin, int64_t end);
  // out[:, begin:end] from rows [begin, end) of w_down and all of act.
  void (*mlp_down)(const MlpArgs&, int64_t begin, int64_t end);
  // out[:, begin:end] from rows [begin, end) of the weight (LinearArgs).
  void (*linear)(const LinearArgs&, int64_t begin, int64_t end);
  // rows [begin, end) of the gated norm.
  void (*gated)(const GatedArgs&, int64_t begin, int64_t end);
  // rows [begin, end) of the gated norm's backward, grad_weight into `partial`.
  void (*gated_backward)(const GatedBackwardArgs&, int64_t begin, int64_t end, void* partial);
};

// Defined by kernels_<capability>.cpp. A capability the compiler or target
// cannot build returns nullptr (e.g. the AVX tables on aarch64).
const KernelTable* kernel_table_DEFAULT();
const KernelTable* kernel_table_AVX2();
const KernelTable* kernel_table_AVX512();
const KernelTable* kernel_table_AVX512_BF16();

}  // namespace rmsnorm_cpu
