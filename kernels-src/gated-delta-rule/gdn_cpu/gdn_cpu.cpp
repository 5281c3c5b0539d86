// The CPU ops: check arguments, widen g/beta to float32, start the state, and
// hand plain pointers to the loops for this CPU, one thread per group of
// (batch, value head) problems.
#include "../torch-ext/gdn_common.h"
#include "../torch-ext/torch_binding.h"
#include "kernels.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gdn_cpu {
namespace {

bool cpu_supports(const char* feature) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (std::strcmp(feature, "avx512") == 0) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  if (std::strcmp(feature, "avx512bf16") == 0) {
    return __builtin_cpu_supports("avx512bf16");
  }
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  (void)feature;
  return false;
#endif
}

// The loops this CPU can run, limited to those compiled. The loops use no ATen
// vector code, so torch's own choice (AVX2 on some AVX-512 CPUs) does not bind
// them, except where the user caps it with ATEN_CPU_CAPABILITY.
const KernelTable* table_for(const std::string& capability) {
  const bool capped = std::getenv("ATEN_CPU_CAPABILITY") != nullptr;
  const std::string torch_best = at::get_cpu_capability();
  const bool avx512_ok = cpu_supports("avx512") && (!capped || torch_best == "AVX512");
  const bool avx2_ok = cpu_supports("avx2") && (!capped || avx512_ok || torch_best == "AVX2");
  if (capability == "AVX512_BF16") {
    return avx512_ok && cpu_supports("avx512bf16") ? kernel_table_AVX512_BF16() : nullptr;
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

void fill_strides(int64_t* dst, const at::Tensor& t) {
  dst[0] = t.stride(0);
  dst[1] = t.stride(1);
  dst[2] = t.stride(2);
}

// The longest chunk the loops run, whatever chunk_size asks (the result is the
// same rule): the chunk-length-dependent products (q.k, k.k, the intra-chunk
// outputs) cost 3 * chunk * 128 multiply-adds per token and head against a
// fixed 3 * 128 * 128 for reading and writing the state, and shorter chunks
// lose BLAS efficiency. Measured at 1024 tokens, bfloat16, 16/32 heads of 128
// (1.1.0 loops, 1 thread): chunks of 64 114.9 ms, 48 104.5, 32 98.0, 16 102.8.
constexpr int64_t kMaxChunk = 32;

// The head dimension must have unit stride; anything else is copied once.
at::Tensor rows_contiguous(const at::Tensor& t) {
  return t.stride(3) == 1 ? t : t.contiguous();
}

std::tuple<at::Tensor, at::Tensor> run(const char* op, const at::Tensor& q_in,
                                       const at::Tensor& k_in, const at::Tensor& v_in,
                                       const at::Tensor& g_in, const at::Tensor& beta_in,
                                       double scale, const std::optional<at::Tensor>& initial_state,
                                       bool l2norm, int64_t chunk, bool chunked) {
  const gdn_common::Shape s = gdn_common::check(op, q_in, k_in, v_in, g_in, beta_in, initial_state);
  TORCH_CHECK_VALUE(q_in.device().is_cpu(), op, ": expected CPU tensors, got ", q_in.device());
  const at::Tensor q = rows_contiguous(q_in), k = rows_contiguous(k_in), v = rows_contiguous(v_in);
  const at::Tensor g = g_in.to(at::kFloat).contiguous();
  const at::Tensor beta = beta_in.to(at::kFloat).contiguous();
  at::Tensor state = gdn_common::start_state(s, initial_state, q.options());
  at::Tensor out = at::empty({s.batch, s.seq, s.hv, s.dv}, v.options());
  if (s.batch * s.hv == 0 || s.seq == 0) {
    return {out, state};
  }
  // Value heads of one key head share a task where that still leaves every thread
  // a task (their q/k work is then done once, not Hv / Hk times).
  const int64_t task_heads =
      chunked && s.batch * s.hk >= at::get_num_threads() ? s.hv / s.hk : 1;
  GdnArgs args{q.const_data_ptr(), k.const_data_ptr(), v.const_data_ptr(), g.const_data_ptr<float>(),
               beta.const_data_ptr<float>(), state.data_ptr<float>(), out.data_ptr(),
               s.batch, s.seq, s.hk, s.hv, s.dk, s.dv, {}, {}, {},
               static_cast<float>(scale), l2norm, std::min(chunk, kMaxChunk), task_heads,
               q.scalar_type()};
  fill_strides(args.q_stride, q);
  fill_strides(args.k_stride, k);
  fill_strides(args.v_stride, v);
  const KernelTable* table = active_table().load();
  const auto loop = chunked ? table->chunked : table->recurrent;
  at::parallel_for(0, s.batch * s.hv / task_heads, 1,
                   [&](int64_t begin, int64_t end) { loop(args, begin, end); });
  return {out, state};
}

}  // namespace
}  // namespace gdn_cpu

std::tuple<at::Tensor, at::Tensor> chunk_gated_delta_rule_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, double scale, const std::optional<at::Tensor>& initial_state,
    bool use_qk_l2norm, int64_t chunk_size) {
  TORCH_CHECK_VALUE(chunk_size >= 1 && chunk_size <= 256,
                    "chunk_gated_delta_rule: chunk_size must be in [1, 256], got ", chunk_size);
  return gdn_cpu::run("chunk_gated_delta_rule", q, k, v, g, beta, scale, initial_state,
                      use_qk_l2norm, chunk_size, true);
}

std::tuple<at::Tensor, at::Tensor> recurrent_gated_delta_rule_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
    const at::Tensor& beta, double scale, const std::optional<at::Tensor>& initial_state,
    bool use_qk_l2norm) {
  return gdn_cpu::run("fused_recurrent_gated_delta_rule", q, k, v, g, beta, scale, initial_state,
                      use_qk_l2norm, 1, false);
}

namespace gdn_cpu {
namespace {

at::Tensor conv_silu(const at::Tensor& x_in, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& state,
                     int64_t keep) {
  const char* op = "causal_conv1d_silu";
  TORCH_CHECK_VALUE(x_in.dim() == 3, op, ": x must be [batch, seq, channels], got ", x_in.sizes());
  TORCH_CHECK_VALUE(x_in.device().is_cpu(), op, ": expected CPU tensors, got ", x_in.device());
  const auto dtype = x_in.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, op,
                    ": x must be float32, bfloat16 or float16, got ", dtype);
  const int64_t batch = x_in.size(0), seq = x_in.size(1), channels = x_in.size(2);
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(0) == channels && weight.size(1) >= 1, op,
                    ": weight must be [channels, width] = [", channels, ", width], got ",
                    weight.sizes());
  const int64_t width = weight.size(1);
  TORCH_CHECK_VALUE(keep >= 0 && keep <= seq, op, ": keep must be in [0, ", seq, "], got ", keep);
  if (bias.has_value()) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == channels, op,
                      ": bias must be [channels] = [", channels, "], got ", bias->sizes());
  }
  if (state.has_value()) {
    TORCH_CHECK_VALUE(state->dim() == 3 && state->size(0) == batch &&
                          state->size(1) == channels && state->size(2) >= width - 1,
                      op, ": state must be [batch, channels, at least width - 1] = [", batch, ", ",
                      channels, ", >= ", width - 1, "], got ", state->sizes());
    TORCH_CHECK_VALUE(state->scalar_type() == dtype && state->is_contiguous(), op,
                      ": state must be contiguous and of x's dtype ", dtype);
  }
  const at::Tensor x = x_in.stride(2) == 1 ? x_in : x_in.contiguous();
  const at::Tensor w = weight.to(at::kFloat).t().contiguous();
  const at::Tensor b = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor out = at::empty({batch, keep, channels}, x.options());
  if (batch * keep * channels > 0) {
    ConvArgs args{x.const_data_ptr(),
                  {x.stride(0), x.stride(1)},
                  state.has_value() ? state->const_data_ptr() : nullptr,
                  state.has_value() ? state->size(2) : 0,
                  w.const_data_ptr<float>(),
                  b.defined() ? b.const_data_ptr<float>() : nullptr,
                  out.data_ptr(),
                  batch, seq, channels, width, keep, dtype};
    const KernelTable* table = active_table().load();
    // Rows of a few thousand channels: a grain of 4 rows keeps decode on one thread.
    at::parallel_for(0, batch * keep, 4,
                     [&](int64_t begin, int64_t end) { table->conv(args, begin, end); });
  }
  if (state.has_value() && state->size(2) > 0) {
    // The state becomes its width's worth of the latest inputs (the cache's layout).
    const int64_t keep_cols = state->size(2);
    at::Tensor window = at::cat({*state, x.transpose(1, 2)}, 2);
    state->copy_(window.narrow(2, window.size(2) - keep_cols, keep_cols));
  }
  return out;
}

}  // namespace
}  // namespace gdn_cpu

at::Tensor causal_conv1d_silu(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias,
                              const std::optional<at::Tensor>& state, int64_t keep) {
  return gdn_cpu::conv_silu(x, weight, bias, state, keep);
}

std::string cpu_capability() {
  return gdn_cpu::active_table().load()->capability;
}

std::string set_cpu_capability(const std::string& capability) {
  const gdn_cpu::KernelTable* table = gdn_cpu::table_for(capability);
  TORCH_CHECK_VALUE(table != nullptr, "set_cpu_capability: '", capability,
                    "' loops are not available on this CPU/build; choose DEFAULT, AVX2, AVX512 or "
                    "AVX512_BF16 (what this CPU supports)");
  return gdn_cpu::active_table().exchange(table)->capability;
}
