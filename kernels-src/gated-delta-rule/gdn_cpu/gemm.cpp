// The products as at::addmm_ on tensors over the caller's buffers (no copy):
// torch's own BLAS path (MKL/oneDNN/OpenBLAS), which its exported API reaches
// (the raw cpublas entry points are not exported by libtorch). Inside the op's
// at::parallel_for each call runs on the calling thread.
#include "gemm.h"

#include <ATen/ATen.h>

namespace gdn_cpu {
namespace {

at::Tensor view(const float* data, int64_t rows, int64_t cols, int64_t ld) {
  return at::from_blob(const_cast<float*>(data), {rows, cols}, {ld, 1},
                       at::TensorOptions().dtype(at::kFloat));
}

void addmm(float* c, int64_t m, int64_t n, int64_t ldc, const at::Tensor& a, const at::Tensor& b,
           float alpha, float beta) {
  at::Tensor out = view(c, m, n, ldc);
  if (beta == 0.f) {
    at::mm_out(out, a, b);
    if (alpha != 1.f) {
      out.mul_(alpha);
    }
    return;
  }
  out.addmm_(a, b, beta, alpha);
}

}  // namespace

void mm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  addmm(c, m, n, ldc, view(a, m, k, lda), view(b, k, n, ldb), alpha, beta);
}

void mm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  addmm(c, m, n, ldc, view(a, m, k, lda), view(b, n, k, ldb).t(), alpha, beta);
}

void mm_tn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  addmm(c, m, n, ldc, view(a, k, m, lda).t(), view(b, k, n, ldb), alpha, beta);
}

}  // namespace gdn_cpu
