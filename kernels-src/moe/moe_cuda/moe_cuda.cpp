// CUDA op layer of the moe kernel. Experts: the (token, slot) pairs are sorted by expert
// (a stable sort of the expert ids, sentinels last), the rows gathered into one block,
// each expert's rows multiplied by its gate/up and down weights with ATen's GEMMs
// (cuBLAS; the bias added by the GEMM), the gated activation applied to the whole block
// by one kernel between the two GEMM passes, and each token's output summed from its
// slots in float32 in slot order, weights applied on the way (moe_kernels.cu). The
// per-expert row counts come to the host once per call (one synchronisation), since
// the GEMMs are launched from it. Router: ATen's ops (GEMM, softmax or sigmoid, top-k,
// renormalisation) with the CPU kernel's contract.
#include "../moe_common/args.h"
#include "../torch-ext/torch_binding.h"
#include "kernels.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

at::Tensor moe_experts(const at::Tensor& hidden_in, const at::Tensor& index_in,
                       const at::Tensor& weights_in, const at::Tensor& gate_up,
                       const at::Tensor& down, int64_t activation,
                       const c10::optional<at::Tensor>& gate_up_bias,
                       const c10::optional<at::Tensor>& down_bias, bool transposed,
                       bool interleaved, double alpha, double limit, int64_t gemm_rows) {
  (void)gemm_rows;  // every expert goes to cuBLAS on CUDA
  moe::check_experts_args(hidden_in, index_in, weights_in, gate_up, down, activation,
                          transposed, gate_up_bias, down_bias);
  const auto device = hidden_in.device();
  bool same_device = device.is_cuda() && index_in.device() == device &&
                     weights_in.device() == device && gate_up.device() == device &&
                     down.device() == device;
  if (gate_up_bias.has_value())
    same_device = same_device && gate_up_bias->device() == device &&
                  down_bias->device() == device;
  TORCH_CHECK(same_device, "moe_experts: every tensor must be on hidden's CUDA device ",
              device);
  const c10::DeviceGuard guard(device);
  const at::Tensor hidden = hidden_in.contiguous();
  const at::Tensor weights = weights_in.to(at::kFloat).contiguous();
  const int64_t tokens = hidden.size(0), h = hidden.size(1), k = index_in.size(1);
  const int64_t experts = gate_up.size(0), inter = down.size(transposed ? 1 : 2);
  const int64_t slots = tokens * k;
  const bool bf16 = hidden.scalar_type() == at::kBFloat16;
  at::Tensor out = at::empty_like(hidden);
  if (tokens == 0) return out;

  // Expert of each slot, sentinels (outside [0, E)) as E, so they sort last.
  at::Tensor key = index_in.to(at::kLong).reshape({slots});
  key = at::where((key >= 0) & (key < experts), key, at::full_like(key, experts));
  const at::Tensor order = std::get<1>(at::sort(key, /*stable=*/true, 0, false));
  const at::Tensor counts = at::bincount(key, {}, experts + 1).cpu();
  const int64_t* count = counts.data_ptr<int64_t>();
  const int64_t rows = slots - count[experts];
  const at::Tensor sorted = order.narrow(0, 0, rows);
  at::Tensor pos = at::full({slots}, -1, key.options());
  pos.index_put_({sorted}, at::arange(rows, key.options()));
  const at::Tensor xs = hidden.index_select(0, at::floor_divide(sorted, k));

  at::Tensor gu = at::empty({rows, 2 * inter}, hidden.options());
  at::Tensor act = at::empty({rows, inter}, hidden.options());
  at::Tensor y = at::empty({rows, h}, hidden.options());
  auto each_expert = [&](auto&& fn) {
    for (int64_t e = 0, first = 0; e < experts; first += count[e], ++e)
      if (count[e] > 0) fn(e, first, count[e]);
  };
  each_expert([&](int64_t e, int64_t first, int64_t n) {
    const at::Tensor w = transposed ? gate_up[e] : gate_up[e].t();
    at::Tensor part = gu.narrow(0, first, n);
    if (gate_up_bias.has_value())
      at::addmm_out(part, (*gate_up_bias)[e], xs.narrow(0, first, n), w);
    else
      at::mm_out(part, xs.narrow(0, first, n), w);
  });
  moe_cuda::launch_gate({gu.data_ptr(), act.data_ptr(), rows, inter, activation, interleaved,
                         bf16, static_cast<float>(alpha), static_cast<float>(limit)});
  each_expert([&](int64_t e, int64_t first, int64_t n) {
    const at::Tensor w = transposed ? down[e] : down[e].t();
    at::Tensor part = y.narrow(0, first, n);
    if (down_bias.has_value())
      at::addmm_out(part, (*down_bias)[e], act.narrow(0, first, n), w);
    else
      at::mm_out(part, act.narrow(0, first, n), w);
  });
  moe_cuda::launch_scatter({y.data_ptr(), pos.data_ptr<int64_t>(), weights.data_ptr<float>(),
                            out.data_ptr(), tokens, k, h, bf16});
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> moe_router(
    const at::Tensor& hidden, const at::Tensor& weight, int64_t top_k, int64_t scoring,
    const c10::optional<at::Tensor>& bias, double softcap) {
  moe::check_router_args(hidden, weight, top_k, scoring, bias);
  const c10::DeviceGuard guard(hidden.device());
  const at::Tensor logits = at::mm(hidden, weight.t());
  at::Tensor logits32 = logits.to(at::kFloat);
  if (scoring == 1 && softcap > 0.0) logits32 = at::tanh(logits32 / softcap) * softcap;
  const at::Tensor score = scoring == 0 ? at::softmax(logits32, -1) : at::sigmoid(logits32);
  const at::Tensor select =
      scoring == 1 && bias.has_value() ? score + bias->to(at::kFloat) : score;
  const at::Tensor index = std::get<1>(at::topk(select, top_k, -1, true, true));
  at::Tensor top = score.gather(-1, index);
  top = top / top.sum(-1, true);
  return {scoring == 1 ? logits32 : logits, top.to(hidden.scalar_type()), index};
}
