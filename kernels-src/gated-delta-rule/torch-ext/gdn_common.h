// Argument checks shared by the CPU and CUDA op layers, so both reject the
// same inputs with the same one-line message. Header-only: each backend part
// compiles it into its own object.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>

namespace gdn_common {

struct Shape {
  int64_t batch, seq, hk, hv, dk, dv;
};

// q, k [B, T, Hk, Dk], v [B, T, Hv, Dv] with Hv a multiple of Hk, g and beta
// [B, T, Hv], initial_state [B, Hv, Dk, Dv]; one device, q/k/v one float dtype.
inline Shape check(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const at::Tensor& g, const at::Tensor& beta,
                   const std::optional<at::Tensor>& initial_state) {
  TORCH_CHECK_VALUE(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
                    ": q, k and v must be [batch, seq, heads, head_dim], got ", q.sizes(), ", ",
                    k.sizes(), " and ", v.sizes());
  TORCH_CHECK_VALUE(q.sizes() == k.sizes(), op, ": q and k must have one shape, got ", q.sizes(),
                    " and ", k.sizes());
  const Shape s{k.size(0), k.size(1), k.size(2), v.size(2), k.size(3), v.size(3)};
  TORCH_CHECK_VALUE(v.size(0) == s.batch && v.size(1) == s.seq, op,
                    ": v must share q's batch and sequence sizes, got ", v.sizes(), " for q ",
                    q.sizes());
  TORCH_CHECK_VALUE(s.hk > 0 && s.hv % s.hk == 0, op, ": value heads (", s.hv,
                    ") must be a multiple of key heads (", s.hk, ")");
  for (const at::Tensor* t : {&g, &beta}) {
    TORCH_CHECK_VALUE(t->dim() == 3 && t->size(0) == s.batch && t->size(1) == s.seq &&
                          t->size(2) == s.hv,
                      op, ": g and beta must be [batch, seq, value_heads] = [", s.batch, ", ",
                      s.seq, ", ", s.hv, "], got ", t->sizes());
  }
  const auto dtype = q.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, op,
                    ": q, k and v must be float32, bfloat16 or float16, got ", dtype);
  TORCH_CHECK_VALUE(k.scalar_type() == dtype && v.scalar_type() == dtype, op,
                    ": q, k and v must share one dtype, got ", dtype, ", ", k.scalar_type(),
                    " and ", v.scalar_type());
  TORCH_CHECK_VALUE(g.is_floating_point() && beta.is_floating_point(), op,
                    ": g and beta must be floating point, got ", g.scalar_type(), " and ",
                    beta.scalar_type());
  if (initial_state.has_value()) {
    const at::Tensor& st = *initial_state;
    TORCH_CHECK_VALUE(st.dim() == 4 && st.size(0) == s.batch && st.size(1) == s.hv &&
                          st.size(2) == s.dk && st.size(3) == s.dv,
                      op, ": initial_state must be [batch, value_heads, key_dim, value_dim] = [",
                      s.batch, ", ", s.hv, ", ", s.dk, ", ", s.dv, "], got ", st.sizes());
    TORCH_CHECK_VALUE(st.is_floating_point() && st.device() == q.device(), op,
                      ": initial_state must be a floating tensor on ", q.device());
  }
  for (const at::Tensor* t : {&k, &v, &g, &beta}) {
    TORCH_CHECK_VALUE(t->device() == q.device(), op, ": every tensor must be on ", q.device(),
                      ", got one on ", t->device());
  }
  return s;
}

// The float32 state the kernels update in place: a copy of initial_state (so
// the caller's tensor is never written) or zeros.
inline at::Tensor start_state(const Shape& s, const std::optional<at::Tensor>& initial_state,
                              const at::TensorOptions& on) {
  if (initial_state.has_value()) {
    return initial_state->to(on.dtype(at::kFloat), /*non_blocking=*/false, /*copy=*/true)
        .contiguous();
  }
  return at::zeros({s.batch, s.hv, s.dk, s.dv}, on.dtype(at::kFloat));
}

}  // namespace gdn_common
