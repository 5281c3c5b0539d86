// The CPU loops' table: one per instruction set (kernels_<cap>.cpp). Each loop
// runs the work items [begin, end) of its op, so the op layer (ops_cpu.cpp)
// owns threading and the per-ISA copies include no ATen header.
#pragma once

#include "../mamba_common/args.h"

namespace mamba_ssm {

struct CpuTable {
  const char* capability;
  // items: batch * (len / row_block, rounded up) with a row block, else batch * len
  // (rows of channels) for channel-last x, else batch * dim.
  void (*conv)(const ConvArgs&, int64_t begin, int64_t end);
  // items: batch * (dim / channel_block, rounded up) with a channel block, else batch * dim
  void (*conv_update)(const ConvUpdateArgs&, int64_t begin, int64_t end);
  // items: batch * heads
  void (*scan)(const ScanArgs&, int64_t begin, int64_t end);
  // items: batch * heads
  void (*step)(const StepArgs&, int64_t begin, int64_t end);
  // items: batch * dim
  void (*selective_scan)(const SelectiveScanArgs&, int64_t begin, int64_t end);
};

const CpuTable* cpu_table_DEFAULT();
const CpuTable* cpu_table_AVX2();
const CpuTable* cpu_table_AVX512();
const CpuTable* cpu_table_AVX512_BF16();

}  // namespace mamba_ssm
