// The boundary between the CUDA backend's host side (ops_cuda.cpp, compiled by
// the host compiler against ATen) and the device code (mamba_kernels.cu, which
// includes no ATen header so nvcc's per-architecture passes stay short).
#pragma once

#include "../mamba_common/args.h"

namespace mamba_ssm {

// Each returns 0 or a cudaError_t value. `workspace` is float scratch the
// caller allocated: batch * heads * headdim * dstate floats for the scan,
// batch * dim * dstate for the selective scan.
int launch_conv(const ConvArgs& a, void* stream);
int launch_conv_update(const ConvUpdateArgs& a, void* stream);
int launch_scan(const ScanArgs& a, float* workspace, void* stream);
int launch_step(const StepArgs& a, void* stream);
int launch_selective_scan(const SelectiveScanArgs& a, float* workspace, void* stream);

}  // namespace mamba_ssm
