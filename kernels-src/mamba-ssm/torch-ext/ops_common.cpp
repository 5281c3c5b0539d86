// The op layer shared by every backend: check arguments, allocate outputs and
// hand plain pointers and strides to the backend's loops (mamba_common/
// backend.h). One line per failed check says what was wrong.
#include "torch_binding.h"
#include "../mamba_common/backend.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

namespace {

using mamba_ssm::DType;

DType dtype_of(const at::Tensor& t, const char* op) {
  if (t.scalar_type() == at::kFloat) return DType::Float32;
  if (t.scalar_type() == at::kBFloat16) return DType::BFloat16;
  TORCH_CHECK(false, op, ": dtype ", t.scalar_type(),
              " is not supported (float32 or bfloat16; the Python functions run others in PyTorch)");
}

void check_same(const at::Tensor& a, const at::Tensor& b, const char* what, const char* op) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", what, " must have the dtype of x (",
              a.scalar_type(), "), got ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), op, ": ", what, " must be on the device of x");
}

void check_float(const at::Tensor& t, const at::Tensor& x, const char* what, const char* op) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous() && t.device() == x.device(), op,
              ": ", what, " must be a contiguous float32 tensor on the device of x");
}

const float* opt_float(const std::optional<at::Tensor>& t, const at::Tensor& x, const char* what,
                       const char* op, int64_t numel) {
  if (!t.has_value()) return nullptr;
  check_float(*t, x, what, op);
  TORCH_CHECK(t->numel() == numel, op, ": ", what, " must have ", numel, " elements, got ",
              t->numel());
  return t->data_ptr<float>();
}

}  // namespace

at::Tensor causal_conv1d_fwd(const at::Tensor& x, const at::Tensor& weight_t,
                             const std::optional<at::Tensor>& bias, bool silu) {
  constexpr const char* op = "causal_conv1d_fwd";
  TORCH_CHECK(x.dim() == 3, op, ": x must be [batch, dim, seqlen], got ", x.sizes());
  const DType dtype = dtype_of(x, op);
  const int64_t D = x.size(1);
  TORCH_CHECK(weight_t.dim() == 2 && weight_t.size(1) == D, op, ": weight_t must be [width, ", D,
              "], got ", weight_t.sizes());
  check_float(weight_t, x, "weight_t", op);
  c10::DeviceGuard guard(x.device());
  // Channel-last input gives channel-last output (the layout the model reads back).
  const bool channel_last = x.stride(1) == 1 && x.size(1) > 1;
  at::Tensor out = channel_last
                       ? at::empty({x.size(0), x.size(2), D}, x.options()).transpose(1, 2)
                       : at::empty(x.sizes(), x.options());
  mamba_ssm::ConvArgs a{};
  a.out = out.data_ptr();
  a.x = x.data_ptr();
  a.w = weight_t.data_ptr<float>();
  a.bias = opt_float(bias, x, "bias", op, D);
  a.batch = x.size(0);
  a.dim = D;
  a.len = x.size(2);
  a.width = weight_t.size(0);
  a.x_sb = x.stride(0);
  a.x_sd = x.stride(1);
  a.x_sl = x.stride(2);
  a.o_sb = out.stride(0);
  a.o_sd = out.stride(1);
  a.o_sl = out.stride(2);
  a.silu = silu;
  a.dtype = dtype;
  if (out.numel() > 0) mamba_ssm::run_conv(a);
  return out;
}

at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state,
                                const at::Tensor& weight_t,
                                const std::optional<at::Tensor>& bias, bool silu) {
  constexpr const char* op = "causal_conv1d_update";
  TORCH_CHECK(x.dim() == 3, op, ": x must be [batch, dim, seqlen], got ", x.sizes());
  const DType dtype = dtype_of(x, op);
  check_same(x, conv_state, "conv_state", op);
  const int64_t D = x.size(1);
  TORCH_CHECK(conv_state.dim() == 3 && conv_state.size(0) == x.size(0) && conv_state.size(1) == D,
              op, ": conv_state must be [", x.size(0), ", ", D, ", state_len], got ",
              conv_state.sizes());
  TORCH_CHECK(weight_t.dim() == 2 && weight_t.size(1) == D, op, ": weight_t must be [width, ", D,
              "], got ", weight_t.sizes());
  check_float(weight_t, x, "weight_t", op);
  TORCH_CHECK(conv_state.size(2) >= weight_t.size(0) - 1, op,
              ": conv_state must hold at least width - 1 = ", weight_t.size(0) - 1,
              " positions, got ", conv_state.size(2));
  c10::DeviceGuard guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options());
  mamba_ssm::ConvUpdateArgs a{};
  a.out = out.data_ptr();
  a.x = x.data_ptr();
  a.state = conv_state.data_ptr();
  a.w = weight_t.data_ptr<float>();
  a.bias = opt_float(bias, x, "bias", op, D);
  a.batch = x.size(0);
  a.dim = D;
  a.len = x.size(2);
  a.width = weight_t.size(0);
  a.state_len = conv_state.size(2);
  a.x_sb = x.stride(0);
  a.x_sd = x.stride(1);
  a.x_sl = x.stride(2);
  a.s_sb = conv_state.stride(0);
  a.s_sd = conv_state.stride(1);
  a.s_sl = conv_state.stride(2);
  a.o_sb = out.stride(0);
  a.o_sd = out.stride(1);
  a.o_sl = out.stride(2);
  a.silu = silu;
  a.dtype = dtype;
  if (out.numel() > 0) mamba_ssm::run_conv_update(a);
  return out;
}

std::tuple<at::Tensor, at::Tensor> ssd_scan(
    const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const std::optional<at::Tensor>& D,
    const std::optional<at::Tensor>& z, const std::optional<at::Tensor>& initial_states,
    int64_t chunk_size, bool return_final_states) {
  constexpr const char* op = "ssd_scan";
  TORCH_CHECK(chunk_size > 0, op, ": chunk_size must be positive, got ", chunk_size);
  TORCH_CHECK(x.dim() == 4 && x.stride(3) == 1, op,
              ": x must be [batch, seqlen, heads, headdim] with a contiguous last dim");
  const DType dtype = dtype_of(x, op);
  const int64_t b = x.size(0), L = x.size(1), H = x.size(2), P = x.size(3);
  TORCH_CHECK(B.dim() == 4 && B.size(0) == b && B.size(1) == L && B.stride(3) == 1, op,
              ": B must be [batch, seqlen, groups, dstate] with a contiguous last dim");
  TORCH_CHECK(C.sizes() == B.sizes() && C.stride(3) == 1, op, ": C must have the shape of B");
  check_same(x, B, "B", op);
  check_same(x, C, "C", op);
  const int64_t G = B.size(2), N = B.size(3);
  TORCH_CHECK(G > 0 && H % G == 0, op, ": heads (", H, ") must be a multiple of groups (", G, ")");
  check_float(dt, x, "dt", op);
  TORCH_CHECK(dt.numel() == b * L * H, op, ": dt must be [batch, seqlen, heads]");
  check_float(A, x, "A", op);
  TORCH_CHECK(A.numel() == H, op, ": A must have one value per head");
  if (z.has_value()) {
    check_same(x, *z, "z", op);
    TORCH_CHECK(z->sizes() == x.sizes() && z->stride(3) == 1, op, ": z must have the shape of x");
  }
  c10::DeviceGuard guard(x.device());
  at::Tensor y = at::empty({b, L, H, P}, x.options());
  at::Tensor final_state = return_final_states
                               ? at::empty({b, H, P, N}, x.options().dtype(at::kFloat))
                               : at::empty({0}, x.options().dtype(at::kFloat));
  mamba_ssm::ScanArgs a{};
  a.y = y.data_ptr();
  a.x = x.data_ptr();
  a.dt = dt.data_ptr<float>();
  a.A = A.data_ptr<float>();
  a.B = B.data_ptr();
  a.C = C.data_ptr();
  a.D = opt_float(D, x, "D", op, H * P);
  a.z = z.has_value() ? z->data_ptr() : nullptr;
  a.init = opt_float(initial_states, x, "initial_states", op, b * H * P * N);
  a.final_state = return_final_states ? final_state.data_ptr<float>() : nullptr;
  // The GPU loops keep the states in global memory; the CPU ones in their own buffers.
  at::Tensor workspace = x.is_cpu() ? at::Tensor()
                                    : at::empty({b * H * P * N}, x.options().dtype(at::kFloat));
  a.workspace = x.is_cpu() ? nullptr : workspace.data_ptr<float>();
  a.batch = b;
  a.len = L;
  a.heads = H;
  a.headdim = P;
  a.groups = G;
  a.dstate = N;
  a.chunk = chunk_size;
  a.x_sb = x.stride(0);
  a.x_sl = x.stride(1);
  a.x_sh = x.stride(2);
  a.B_sb = B.stride(0);
  a.B_sl = B.stride(1);
  a.B_sg = B.stride(2);
  a.C_sb = C.stride(0);
  a.C_sl = C.stride(1);
  a.C_sg = C.stride(2);
  if (z.has_value()) {
    a.z_sb = z->stride(0);
    a.z_sl = z->stride(1);
    a.z_sh = z->stride(2);
  }
  a.dtype = dtype;
  if (b * H * P * N > 0) mamba_ssm::run_scan(a);
  return {y, final_state};
}

at::Tensor selective_state_update(at::Tensor& state, const at::Tensor& x, const at::Tensor& dt,
                                  const at::Tensor& A, const at::Tensor& B, const at::Tensor& C,
                                  const std::optional<at::Tensor>& D,
                                  const std::optional<at::Tensor>& z) {
  constexpr const char* op = "selective_state_update";
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1, op,
              ": x must be [batch, heads, headdim] with a contiguous last dim");
  const DType dtype = dtype_of(x, op);
  const int64_t b = x.size(0), H = x.size(1), P = x.size(2);
  TORCH_CHECK(B.dim() == 3 && B.size(0) == b && B.stride(2) == 1, op,
              ": B must be [batch, groups, dstate] with a contiguous last dim");
  TORCH_CHECK(C.sizes() == B.sizes() && C.stride(2) == 1, op, ": C must have the shape of B");
  check_same(x, B, "B", op);
  check_same(x, C, "C", op);
  const int64_t G = B.size(1), N = B.size(2);
  TORCH_CHECK(G > 0 && H % G == 0, op, ": heads (", H, ") must be a multiple of groups (", G, ")");
  TORCH_CHECK(state.dim() == 4 && state.size(0) == b && state.size(1) == H && state.size(2) == P &&
                  state.size(3) == N && state.stride(3) == 1 && state.stride(2) == N,
              op, ": state must be [", b, ", ", H, ", ", P, ", ", N,
              "] with contiguous last two dims, got ", state.sizes());
  TORCH_CHECK(state.device() == x.device(), op, ": state must be on the device of x");
  const bool state_fp32 = state.scalar_type() == at::kFloat;
  TORCH_CHECK(state_fp32 || state.scalar_type() == x.scalar_type(), op,
              ": state must be float32 or the dtype of x");
  check_float(dt, x, "dt", op);
  TORCH_CHECK(dt.numel() == b * H, op, ": dt must be [batch, heads]");
  check_float(A, x, "A", op);
  TORCH_CHECK(A.numel() == H, op, ": A must have one value per head");
  if (z.has_value()) {
    check_same(x, *z, "z", op);
    TORCH_CHECK(z->sizes() == x.sizes() && z->stride(2) == 1, op, ": z must have the shape of x");
  }
  c10::DeviceGuard guard(x.device());
  at::Tensor out = at::empty({b, H, P}, x.options());
  mamba_ssm::StepArgs a{};
  a.out = out.data_ptr();
  a.state = state.data_ptr();
  a.x = x.data_ptr();
  a.dt = dt.data_ptr<float>();
  a.A = A.data_ptr<float>();
  a.B = B.data_ptr();
  a.C = C.data_ptr();
  a.D = opt_float(D, x, "D", op, H * P);
  a.z = z.has_value() ? z->data_ptr() : nullptr;
  a.batch = b;
  a.heads = H;
  a.headdim = P;
  a.groups = G;
  a.dstate = N;
  a.s_sb = state.stride(0);
  a.s_sh = state.stride(1);
  a.x_sb = x.stride(0);
  a.x_sh = x.stride(1);
  a.B_sb = B.stride(0);
  a.B_sg = B.stride(1);
  a.C_sb = C.stride(0);
  a.C_sg = C.stride(1);
  if (z.has_value()) {
    a.z_sb = z->stride(0);
    a.z_sh = z->stride(1);
  }
  a.dtype = dtype;
  a.state_fp32 = state_fp32;
  if (out.numel() > 0 && N > 0) mamba_ssm::run_step(a);
  return out;
}

std::tuple<at::Tensor, at::Tensor> selective_scan(
    const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const std::optional<at::Tensor>& D,
    const std::optional<at::Tensor>& z, bool return_last_state) {
  constexpr const char* op = "selective_scan";
  TORCH_CHECK(u.dim() == 3 && u.stride(2) == 1, op,
              ": u must be [batch, dim, seqlen] with a contiguous last dim");
  const DType dtype = dtype_of(u, op);
  const int64_t b = u.size(0), Dm = u.size(1), L = u.size(2);
  TORCH_CHECK(B.dim() == 4 && B.size(0) == b && B.size(3) == L && B.stride(3) == 1, op,
              ": B must be [batch, groups, dstate, seqlen] with a contiguous last dim");
  TORCH_CHECK(C.sizes() == B.sizes() && C.stride(3) == 1, op, ": C must have the shape of B");
  check_same(u, B, "B", op);
  check_same(u, C, "C", op);
  const int64_t G = B.size(1), N = B.size(2);
  TORCH_CHECK(G > 0 && Dm % G == 0, op, ": dim (", Dm, ") must be a multiple of groups (", G, ")");
  check_float(delta, u, "delta", op);
  TORCH_CHECK(delta.numel() == b * Dm * L, op, ": delta must be [batch, dim, seqlen]");
  check_float(A, u, "A", op);
  TORCH_CHECK(A.numel() == Dm * N, op, ": A must be [dim, dstate]");
  if (z.has_value()) {
    check_same(u, *z, "z", op);
    TORCH_CHECK(z->sizes() == u.sizes() && z->stride(2) == 1, op, ": z must have the shape of u");
  }
  c10::DeviceGuard guard(u.device());
  at::Tensor out = at::empty({b, Dm, L}, u.options());
  at::Tensor last = return_last_state ? at::empty({b, Dm, N}, u.options().dtype(at::kFloat))
                                      : at::empty({0}, u.options().dtype(at::kFloat));
  mamba_ssm::SelectiveScanArgs a{};
  a.out = out.data_ptr();
  a.u = u.data_ptr();
  a.delta = delta.data_ptr<float>();
  a.A = A.data_ptr<float>();
  a.B = B.data_ptr();
  a.C = C.data_ptr();
  a.D = opt_float(D, u, "D", op, Dm);
  a.z = z.has_value() ? z->data_ptr() : nullptr;
  a.last_state = return_last_state ? last.data_ptr<float>() : nullptr;
  at::Tensor workspace = u.is_cpu() ? at::Tensor()
                                    : at::empty({b * Dm * N}, u.options().dtype(at::kFloat));
  a.workspace = u.is_cpu() ? nullptr : workspace.data_ptr<float>();
  a.batch = b;
  a.dim = Dm;
  a.len = L;
  a.dstate = N;
  a.groups = G;
  a.u_sb = u.stride(0);
  a.u_sd = u.stride(1);
  a.B_sb = B.stride(0);
  a.B_sg = B.stride(1);
  a.B_sn = B.stride(2);
  a.C_sb = C.stride(0);
  a.C_sg = C.stride(1);
  a.C_sn = C.stride(2);
  if (z.has_value()) {
    a.z_sb = z->stride(0);
    a.z_sd = z->stride(1);
  }
  a.dtype = dtype;
  if (b * Dm > 0 && (L > 0 || return_last_state)) {
    if (L == 0) {
      last.zero_();
    } else {
      mamba_ssm::run_selective_scan(a);
    }
  }
  return {out, last};
}
