#include "attention_common.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>
#include <vector>

namespace flash_attn2 {
namespace {

bool is_supported_dtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf;
}

// bool: true = attend (0), false = masked (-inf), as scaled_dot_product_attention;
// floating masks are added to the scores as they are.
at::Tensor prepare_mask(const char* op, const at::Tensor& mask, const Problem& p) {
  TORCH_CHECK(mask.dim() <= 4, op, ": attn_mask must have at most 4 dimensions ",
              "(broadcastable to [batch, heads, seq_q, seq_k]), got ", mask.sizes());
  TORCH_CHECK(mask.scalar_type() == c10::kBool || at::isFloatingType(mask.scalar_type()), op,
              ": attn_mask must be bool or floating point, got ", mask.scalar_type());
  const std::vector<int64_t> full{p.batch, p.heads_q, p.seq_q, p.seq_k};
  std::vector<int64_t> sizes(4 - mask.dim(), 1);
  sizes.insert(sizes.end(), mask.sizes().begin(), mask.sizes().end());
  for (size_t i = 0; i < 4; ++i) {
    TORCH_CHECK(sizes[i] == 1 || sizes[i] == full[i], op, ": attn_mask of shape ", mask.sizes(),
                " does not broadcast to [batch, heads_q, seq_q, seq_k] = ",
                c10::IntArrayRef(full));
  }
  at::Tensor additive = mask.view(sizes);
  if (mask.scalar_type() == c10::kBool) {
    additive = at::where(additive, at::zeros({}, mask.options().dtype(at::kFloat)),
                         at::full({}, -std::numeric_limits<float>::infinity(),
                                  mask.options().dtype(at::kFloat)));
  } else {
    additive = additive.to(at::kFloat);
  }
  if (additive.size(3) != p.seq_k || additive.stride(3) != 1) {
    // Materialise only the key dimension; the others stay broadcast (stride 0).
    additive = additive.expand({sizes[0], sizes[1], sizes[2], p.seq_k}).contiguous();
  }
  return additive.expand(c10::IntArrayRef(full));
}

}  // namespace

Problem prepare(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& mask, double scale, bool causal,
                int64_t window_left, int64_t window_right, double softcap,
                const at::Tensor* out) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": query, key and value must be 4-D [batch, heads, seq, head_dim], got ", q.sizes(),
              ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(is_supported_dtype(q.scalar_type()), op,
              ": dtype must be float32, bfloat16 or float16, got ", q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
              ": query, key and value must share a dtype, got ", q.scalar_type(), ", ",
              k.scalar_type(), " and ", v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), op,
              ": query, key and value must be on one device, got ", q.device(), ", ",
              k.device(), " and ", v.device());
  Problem p{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3),
            window_left, window_right, at::Tensor()};
  TORCH_CHECK(k.size(0) == p.batch && v.size(0) == p.batch, op,
              ": query, key and value must have the same batch size, got ", q.sizes(), ", ",
              k.sizes(), " and ", v.sizes());
  TORCH_CHECK(v.size(1) == p.heads_kv && v.size(2) == p.seq_k, op,
              ": key and value must have the same heads and sequence length, got ", k.sizes(),
              " and ", v.sizes());
  TORCH_CHECK(k.size(3) == p.head_dim, op, ": query and key must have the same head_dim, got ",
              q.sizes(), " and ", k.sizes());
  TORCH_CHECK(p.heads_kv > 0 && p.heads_q % p.heads_kv == 0, op,
              ": the query heads (", p.heads_q, ") must be a multiple of the key/value heads (",
              p.heads_kv, ") for grouped-query attention");
  TORCH_CHECK(softcap >= 0.0, op, ": softcap must be >= 0 (0 = off), got ", softcap);
  TORCH_CHECK(scale > 0.0, op, ": scale must be positive, got ", scale);
  if (causal) {
    // Causal is the window (left, 0): a query sees no key to its right.
    p.window_right = 0;
  }
  if (out != nullptr) {
    const std::vector<int64_t> expected{p.batch, p.heads_q, p.seq_q, p.head_dim_v};
    TORCH_CHECK(out->sizes() == c10::IntArrayRef(expected), op, ": out must have shape ",
                c10::IntArrayRef(expected), " ([batch, heads_q, seq_q, head_dim_v]), got ",
                out->sizes());
    TORCH_CHECK(out->scalar_type() == q.scalar_type(), op, ": out dtype (", out->scalar_type(),
                ") must match the query dtype (", q.scalar_type(), ")");
    TORCH_CHECK(out->device() == q.device(), op, ": out must be on ", q.device(), ", got ",
                out->device());
  }
  if (mask.has_value() && mask->defined()) {
    TORCH_CHECK(mask->device() == q.device(), op, ": attn_mask must be on ", q.device(),
                ", got ", mask->device());
    p.mask = prepare_mask(op, *mask, p);
  }
  return p;
}

namespace {

// [B, Hq, Sq, Dv] strides of the op's output: a transposed [B, Sq, Hq, Dv] buffer where q
// is one (as Transformers' projections hand it over), else contiguous, as torch's CPU
// sdpa lays out its output; the fake (_fake.py) follows the same rule.
// q.transpose(1, 2).is_contiguous(), from the strides alone (no tensor made).
bool rows_by_position(const at::Tensor& q) {
  if (q.numel() == 0) {
    return true;
  }
  int64_t expected = 1;
  for (const int64_t d : {3, 1, 2, 0}) {
    if (q.size(d) == 1) {
      continue;
    }
    if (q.stride(d) != expected) {
      return false;
    }
    expected *= q.size(d);
  }
  return true;
}

std::vector<int64_t> output_strides(const at::Tensor& q, int64_t dv) {
  const int64_t heads = q.size(1);
  const int64_t seq = q.size(2);
  if (rows_by_position(q)) {
    return {seq * heads * dv, dv, heads * dv, 1};
  }
  return {heads * seq * dv, seq * dv, dv, 1};
}

}  // namespace

at::Tensor empty_output(const at::Tensor& q, const at::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && v.dim() == 4,
              "flash_attn2.attention: query and value must be 4-D [batch, heads, seq, head_dim], "
              "got ", q.sizes(), " and ", v.sizes());
  return at::empty_strided({q.size(0), q.size(1), q.size(2), v.size(3)},
                           output_strides(q, v.size(3)), q.options());
}

std::optional<at::Tensor> in_output_layout(const at::Tensor& q, const at::Tensor& t) {
  const std::vector<int64_t> strides = output_strides(q, t.size(3));
  if (t.strides() == c10::IntArrayRef(strides)) {
    return t;
  }
  for (int64_t i = 0; i < 4; ++i) {
    // A dimension of size 1 is never stepped along: its stride addresses nothing.
    if (t.size(i) != 1 && t.stride(i) != strides[i]) {
      return std::nullopt;
    }
  }
  return t.as_strided(t.sizes(), strides, t.storage_offset());
}

at::Tensor rows_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 ? t : t.contiguous();
}

}  // namespace flash_attn2
