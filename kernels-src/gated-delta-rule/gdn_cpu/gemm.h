// Row-major float32 matrix products through torch's CPU BLAS path,
// for the chunked form's dense parts. Compiled once,
// with the build's baseline flags: the BLAS picks its own instruction set.
#pragma once

#include <cstdint>

namespace gdn_cpu {

// c[m x n] = alpha * a[m x k] @ b[k x n] + beta * c
void mm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// c[m x n] = alpha * a[m x k] @ b[n x k]^T + beta * c
void mm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// c[m x n] = alpha * a[k x m]^T @ b[k x n] + beta * c
void mm_tn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace gdn_cpu
