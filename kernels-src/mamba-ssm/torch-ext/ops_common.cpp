// The op layer shared by every backend: check arguments, allocate outputs and
// hand plain pointers and strides to the backend's loops (mamba_common/
// backend.h). Every op checks its arguments through one `Checker`, so each
// kind of check is written once and every failed check raises one line naming
// the op and the argument.
#include "torch_binding.h"
#include "../mamba_common/backend.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <initializer_list>

namespace {

using mamba_ssm::DType;

// The checks of one op against its main input `x` (the tensor whose dtype and
// device the others follow).
class Checker {
 public:
  // x has `dims` dims (`shape` names them); its last dim must be contiguous
  // unless `any_layout`.
  Checker(const char* op, const at::Tensor& x, const char* name, int64_t dims, const char* shape,
          bool any_layout = false)
      : op_(op), x_(x), name_(name) {
    TORCH_CHECK(x.dim() == dims && (any_layout || x.stride(dims - 1) == 1), op, ": ", name,
                " must be ", shape, any_layout ? "" : " with a contiguous last dim", ", got ",
                x.sizes());
    if (x.scalar_type() == at::kFloat) {
      dtype_ = DType::Float32;
    } else {
      TORCH_CHECK(x.scalar_type() == at::kBFloat16, op, ": dtype ", x.scalar_type(),
                  " is not supported (float32 or bfloat16; the Python functions run others in "
                  "PyTorch)");
      dtype_ = DType::BFloat16;
    }
  }

  DType dtype() const { return dtype_; }

  // `t` has x's dtype and device.
  void like_x(const at::Tensor& t, const char* what) const {
    TORCH_CHECK(t.scalar_type() == x_.scalar_type(), op_, ": ", what, " must have the dtype of ",
                name_, " (", x_.scalar_type(), "), got ", t.scalar_type());
    TORCH_CHECK(t.device() == x_.device(), op_, ": ", what, " must be on the device of ", name_);
  }

  // B with `dims` dims whose leading sizes are `leading` (-1: any), a contiguous
  // last dim and x's dtype; C of B's shape.
  void b_and_c(const at::Tensor& B, const at::Tensor& C, int64_t dims,
               std::initializer_list<int64_t> leading, const char* shape) const {
    bool ok = B.dim() == dims && B.stride(dims - 1) == 1;
    int64_t i = 0;
    for (const int64_t size : leading) {
      ok = ok && (size < 0 || B.size(i) == size);
      ++i;
    }
    TORCH_CHECK(ok, op_, ": B must be ", shape, " with a contiguous last dim, got ", B.sizes());
    TORCH_CHECK(C.sizes() == B.sizes() && C.stride(dims - 1) == 1, op_,
                ": C must have the shape of B");
    like_x(B, "B");
    like_x(C, "C");
  }

  // `groups` divides `channels` (the heads or channels sharing one B and C).
  void groups(int64_t channels, int64_t groups, const char* what) const {
    TORCH_CHECK(groups > 0 && channels % groups == 0, op_, ": ", what, " (", channels,
                ") must be a multiple of groups (", groups, ")");
  }

  // A contiguous float32 tensor of `numel` elements on x's device (`shape` says
  // what it should be).
  const float* floats(const at::Tensor& t, const char* what, int64_t numel,
                      const char* shape) const {
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous() && t.device() == x_.device(),
                op_, ": ", what, " must be a contiguous float32 tensor on the device of ", name_);
    TORCH_CHECK(t.numel() == numel, op_, ": ", what, " must be ", shape, " (", numel,
                " elements), got ", t.numel());
    return t.data_ptr<float>();
  }

  const float* opt_floats(const std::optional<at::Tensor>& t, const char* what, int64_t numel,
                          const char* shape) const {
    return t.has_value() ? floats(*t, what, numel, shape) : nullptr;
  }

  // The output gate z: x's shape, dtype and device, contiguous last dim.
  const void* gate(const std::optional<at::Tensor>& z) const {
    if (!z.has_value()) return nullptr;
    like_x(*z, "z");
    TORCH_CHECK(z->sizes() == x_.sizes() && z->stride(z->dim() - 1) == 1, op_,
                ": z must have the shape of ", name_);
    return z->data_ptr();
  }

 private:
  const char* op_;
  const at::Tensor& x_;
  const char* name_;
  DType dtype_ = DType::Float32;
};

// Copies t's leading strides into the args' fields (in the order given).
void take_strides(const at::Tensor& t, std::initializer_list<int64_t*> fields) {
  int64_t i = 0;
  for (int64_t* field : fields) *field = t.stride(i++);
}

// Same for an optional tensor (an absent one leaves the fields at 0).
void take_strides(const std::optional<at::Tensor>& t, std::initializer_list<int64_t*> fields) {
  if (t.has_value()) take_strides(*t, fields);
}

// A float32 buffer the GPU loops keep their states in (none on the CPU, whose
// loops use their own buffers); `keep` holds it until the op returns.
float* gpu_workspace(const at::Tensor& x, int64_t numel, at::Tensor& keep) {
  if (x.is_cpu()) return nullptr;
  keep = at::empty({numel}, x.options().dtype(at::kFloat));
  return keep.data_ptr<float>();
}

// A float32 result of `sizes` when wanted, else an empty placeholder.
at::Tensor float_result(const at::Tensor& x, bool wanted, at::IntArrayRef sizes) {
  const auto options = x.options().dtype(at::kFloat);
  return wanted ? at::empty(sizes, options) : at::empty({0}, options);
}

}  // namespace

at::Tensor causal_conv1d_fwd(const at::Tensor& x, const at::Tensor& weight_t,
                             const std::optional<at::Tensor>& bias, bool silu) {
  const Checker check("causal_conv1d_fwd", x, "x", 3, "[batch, dim, seqlen]", true);
  const int64_t D = x.size(1);
  TORCH_CHECK(weight_t.dim() == 2 && weight_t.size(1) == D,
              "causal_conv1d_fwd: weight_t must be [width, ", D, "], got ", weight_t.sizes());
  c10::DeviceGuard guard(x.device());
  // Channel-last input gives channel-last output (the layout the model reads back).
  const bool channel_last = x.stride(1) == 1 && x.size(1) > 1;
  at::Tensor out = channel_last
                       ? at::empty({x.size(0), x.size(2), D}, x.options()).transpose(1, 2)
                       : at::empty(x.sizes(), x.options());
  mamba_ssm::ConvArgs a{};
  a.out = out.data_ptr();
  a.x = x.data_ptr();
  a.w = check.floats(weight_t, "weight_t", weight_t.numel(), "[width, dim]");
  a.bias = check.opt_floats(bias, "bias", D, "[dim]");
  a.batch = x.size(0);
  a.dim = D;
  a.len = x.size(2);
  a.width = weight_t.size(0);
  take_strides(x, {&a.x_sb, &a.x_sd, &a.x_sl});
  take_strides(out, {&a.o_sb, &a.o_sd, &a.o_sl});
  a.silu = silu;
  a.dtype = check.dtype();
  if (out.numel() > 0) mamba_ssm::run_conv(a);
  return out;
}

at::Tensor causal_conv1d_update(const at::Tensor& x_in, at::Tensor& conv_state,
                                const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, bool silu) {
  constexpr const char* op = "causal_conv1d_update";
  // [batch, dim] is one token (the decode step's own form): viewed here, not in
  // Python, where a view and its undo cost more than the step's loop.
  const bool one_token = x_in.dim() == 2;
  const at::Tensor x = one_token ? x_in.unsqueeze(-1) : x_in;
  const Checker check(op, x, "x", 3, "[batch, dim, seqlen] or [batch, dim]", true);
  check.like_x(conv_state, "conv_state");
  const int64_t D = x.size(1);
  TORCH_CHECK(conv_state.dim() == 3 && conv_state.size(0) == x.size(0) && conv_state.size(1) == D,
              op, ": conv_state must be [", x.size(0), ", ", D, ", state_len], got ",
              conv_state.sizes());
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == D, op, ": weight must be [", D,
              ", width], got ", weight.sizes());
  TORCH_CHECK(conv_state.size(2) >= weight.size(1) - 1, op,
              ": conv_state must hold at least width - 1 = ", weight.size(1) - 1,
              " positions, got ", conv_state.size(2));
  c10::DeviceGuard guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options());
  mamba_ssm::ConvUpdateArgs a{};
  a.out = out.data_ptr();
  a.x = x.data_ptr();
  a.state = conv_state.data_ptr();
  a.w = check.floats(weight, "weight", weight.numel(), "[dim, width]");
  a.bias = check.opt_floats(bias, "bias", D, "[dim]");
  a.batch = x.size(0);
  a.dim = D;
  a.len = x.size(2);
  a.width = weight.size(1);
  a.state_len = conv_state.size(2);
  take_strides(x, {&a.x_sb, &a.x_sd, &a.x_sl});
  take_strides(conv_state, {&a.s_sb, &a.s_sd, &a.s_sl});
  take_strides(out, {&a.o_sb, &a.o_sd, &a.o_sl});
  a.silu = silu;
  a.dtype = check.dtype();
  if (out.numel() > 0) mamba_ssm::run_conv_update(a);
  return one_token ? out.squeeze(-1) : out;
}

std::tuple<at::Tensor, at::Tensor> ssd_scan(
    const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const std::optional<at::Tensor>& D,
    const std::optional<at::Tensor>& z, const std::optional<at::Tensor>& initial_states,
    int64_t chunk_size, bool return_final_states) {
  const Checker check("ssd_scan", x, "x", 4, "[batch, seqlen, heads, headdim]");
  const int64_t b = x.size(0), L = x.size(1), H = x.size(2), P = x.size(3);
  check.b_and_c(B, C, 4, {b, L}, "[batch, seqlen, groups, dstate]");
  const int64_t G = B.size(2), N = B.size(3);
  check.groups(H, G, "heads");
  TORCH_CHECK(chunk_size > 0, "ssd_scan: chunk_size must be positive, got ", chunk_size);
  c10::DeviceGuard guard(x.device());
  at::Tensor y = at::empty({b, L, H, P}, x.options());
  at::Tensor final_state = float_result(x, return_final_states, {b, H, P, N});
  at::Tensor workspace;
  mamba_ssm::ScanArgs a{};
  a.y = y.data_ptr();
  a.x = x.data_ptr();
  a.dt = check.floats(dt, "dt", b * L * H, "[batch, seqlen, heads]");
  a.A = check.floats(A, "A", H, "[heads]");
  a.B = B.data_ptr();
  a.C = C.data_ptr();
  a.D = check.opt_floats(D, "D", H * P, "[heads, headdim]");
  a.z = check.gate(z);
  a.init = check.opt_floats(initial_states, "initial_states", b * H * P * N,
                            "[batch, heads, headdim, dstate]");
  a.final_state = return_final_states ? final_state.data_ptr<float>() : nullptr;
  a.workspace = gpu_workspace(x, b * H * P * N, workspace);
  a.batch = b;
  a.len = L;
  a.heads = H;
  a.headdim = P;
  a.groups = G;
  a.dstate = N;
  a.chunk = chunk_size;
  take_strides(x, {&a.x_sb, &a.x_sl, &a.x_sh});
  take_strides(B, {&a.B_sb, &a.B_sl, &a.B_sg});
  take_strides(C, {&a.C_sb, &a.C_sl, &a.C_sg});
  take_strides(z, {&a.z_sb, &a.z_sl, &a.z_sh});
  a.dtype = check.dtype();
  if (b * H * P * N > 0) mamba_ssm::run_scan(a);
  return {y, final_state};
}

at::Tensor selective_state_update(at::Tensor& state, const at::Tensor& x, const at::Tensor& dt,
                                  const at::Tensor& A, const at::Tensor& B, const at::Tensor& C,
                                  const std::optional<at::Tensor>& D,
                                  const std::optional<at::Tensor>& z) {
  constexpr const char* op = "selective_state_update";
  const Checker check(op, x, "x", 3, "[batch, heads, headdim]");
  const int64_t b = x.size(0), H = x.size(1), P = x.size(2);
  check.b_and_c(B, C, 3, {b}, "[batch, groups, dstate]");
  const int64_t G = B.size(1), N = B.size(2);
  check.groups(H, G, "heads");
  TORCH_CHECK(state.dim() == 4 && state.size(0) == b && state.size(1) == H && state.size(2) == P &&
                  state.size(3) == N && state.stride(3) == 1 && state.stride(2) == N,
              op, ": state must be [", b, ", ", H, ", ", P, ", ", N,
              "] with contiguous last two dims, got ", state.sizes());
  TORCH_CHECK(state.device() == x.device(), op, ": state must be on the device of x");
  const bool state_fp32 = state.scalar_type() == at::kFloat;
  TORCH_CHECK(state_fp32 || state.scalar_type() == x.scalar_type(), op,
              ": state must be float32 or the dtype of x");
  c10::DeviceGuard guard(x.device());
  at::Tensor out = at::empty({b, H, P}, x.options());
  mamba_ssm::StepArgs a{};
  a.out = out.data_ptr();
  a.state = state.data_ptr();
  a.x = x.data_ptr();
  a.dt = check.floats(dt, "dt", b * H, "[batch, heads]");
  a.A = check.floats(A, "A", H, "[heads]");
  a.B = B.data_ptr();
  a.C = C.data_ptr();
  a.D = check.opt_floats(D, "D", H * P, "[heads, headdim]");
  a.z = check.gate(z);
  a.batch = b;
  a.heads = H;
  a.headdim = P;
  a.groups = G;
  a.dstate = N;
  take_strides(state, {&a.s_sb, &a.s_sh});
  take_strides(x, {&a.x_sb, &a.x_sh});
  take_strides(B, {&a.B_sb, &a.B_sg});
  take_strides(C, {&a.C_sb, &a.C_sg});
  take_strides(z, {&a.z_sb, &a.z_sh});
  a.dtype = check.dtype();
  a.state_fp32 = state_fp32;
  if (out.numel() > 0 && N > 0) mamba_ssm::run_step(a);
  return out;
}

std::tuple<at::Tensor, at::Tensor> selective_scan(
    const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& B,
    const at::Tensor& C, const std::optional<at::Tensor>& D,
    const std::optional<at::Tensor>& z, bool return_last_state) {
  const Checker check("selective_scan", u, "u", 3, "[batch, dim, seqlen]");
  const int64_t b = u.size(0), Dm = u.size(1), L = u.size(2);
  check.b_and_c(B, C, 4, {b, -1, -1, L}, "[batch, groups, dstate, seqlen]");
  const int64_t G = B.size(1), N = B.size(2);
  check.groups(Dm, G, "dim");
  c10::DeviceGuard guard(u.device());
  at::Tensor out = at::empty({b, Dm, L}, u.options());
  at::Tensor last = float_result(u, return_last_state, {b, Dm, N});
  at::Tensor workspace;
  mamba_ssm::SelectiveScanArgs a{};
  a.out = out.data_ptr();
  a.u = u.data_ptr();
  a.delta = check.floats(delta, "delta", b * Dm * L, "[batch, dim, seqlen]");
  a.A = check.floats(A, "A", Dm * N, "[dim, dstate]");
  a.B = B.data_ptr();
  a.C = C.data_ptr();
  a.D = check.opt_floats(D, "D", Dm, "[dim]");
  a.z = check.gate(z);
  a.last_state = return_last_state ? last.data_ptr<float>() : nullptr;
  a.workspace = gpu_workspace(u, b * Dm * N, workspace);
  a.batch = b;
  a.dim = Dm;
  a.len = L;
  a.dstate = N;
  a.groups = G;
  take_strides(u, {&a.u_sb, &a.u_sd});
  take_strides(B, {&a.B_sb, &a.B_sg, &a.B_sn});
  take_strides(C, {&a.C_sb, &a.C_sg, &a.C_sn});
  take_strides(z, {&a.z_sb, &a.z_sd});
  a.dtype = check.dtype();
  if (b * Dm > 0 && (L > 0 || return_last_state)) {
    if (L == 0) {
      last.zero_();
    } else {
      mamba_ssm::run_selective_scan(a);
    }
  }
  return {out, last};
}
