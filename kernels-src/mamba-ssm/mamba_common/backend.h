// What each backend part provides to the shared op layer: run one op's loops
// on plain data (mamba_cpu/ops_cpu.cpp, mamba_cuda/ops_cuda.cpp).
#pragma once

#include "args.h"

namespace mamba_ssm {

void run_conv(const ConvArgs& args);
void run_conv_update(const ConvUpdateArgs& args);
void run_scan(const ScanArgs& args);
void run_step(const StepArgs& args);
void run_selective_scan(const SelectiveScanArgs& args);

}  // namespace mamba_ssm
