// The CUDA backend's host side: the current stream, scratch memory, and one
// line naming the CUDA error when a launch fails.
#include "../mamba_common/backend.h"
#include "launch.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

namespace mamba_ssm {
namespace {

void* stream() { return at::cuda::getCurrentCUDAStream().stream(); }

void check(int err, const char* op) {
  TORCH_CHECK(err == 0, op, ": CUDA launch failed: ",
              cudaGetErrorString(static_cast<cudaError_t>(err)));
}

at::Tensor scratch(int64_t n) {
  return at::empty({n}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
}

}  // namespace

void run_conv(const ConvArgs& a) { check(launch_conv(a, stream()), "causal_conv1d_fwd"); }

void run_conv_update(const ConvUpdateArgs& a) {
  check(launch_conv_update(a, stream()), "causal_conv1d_update");
}

void run_scan(const ScanArgs& a) {
  at::Tensor ws = scratch(a.batch * a.heads * a.headdim * a.dstate);
  check(launch_scan(a, ws.data_ptr<float>(), stream()), "ssd_scan");
}

void run_step(const StepArgs& a) { check(launch_step(a, stream()), "selective_state_update"); }

void run_selective_scan(const SelectiveScanArgs& a) {
  at::Tensor ws = scratch(a.batch * a.dim * a.dstate);
  check(launch_selective_scan(a, ws.data_ptr<float>(), stream()), "selective_scan");
}

}  // namespace mamba_ssm
