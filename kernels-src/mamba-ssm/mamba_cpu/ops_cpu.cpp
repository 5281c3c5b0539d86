// The CPU backend: choose the loop copy for this CPU (kernels_<cap>.cpp) and
// split each op's work items over torch's thread pool.
#include "../mamba_common/backend.h"
#include "../torch-ext/torch_binding.h"
#include "kernels.h"

#include <ATen/Version.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <string>

namespace mamba_ssm {
namespace {

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// The loops torch itself would use on this CPU (it honours ATEN_CPU_CAPABILITY),
// limited to those compiled here; AVX512_BF16 is AVX512 plus the bf16 extension.
const CpuTable* table_for(const std::string& capability) {
  const std::string torch_best = at::get_cpu_capability();
  const bool avx512_ok = torch_best == "AVX512";
  const bool avx2_ok = avx512_ok || torch_best == "AVX2";
  if (capability == "AVX512_BF16") {
    return avx512_ok && cpu_has_avx512_bf16() ? cpu_table_AVX512_BF16() : nullptr;
  }
  if (capability == "AVX512") return avx512_ok ? cpu_table_AVX512() : nullptr;
  if (capability == "AVX2") return avx2_ok ? cpu_table_AVX2() : nullptr;
  if (capability == "DEFAULT") return cpu_table_DEFAULT();
  return nullptr;
}

const CpuTable* best_table() {
  for (const char* capability : {"AVX512_BF16", "AVX512", "AVX2"}) {
    if (const CpuTable* table = table_for(capability)) return table;
  }
  return cpu_table_DEFAULT();
}

std::atomic<const CpuTable*>& active_table() {
  static std::atomic<const CpuTable*> table{best_table()};
  return table;
}

// Split `items` work items so each task gets about `work_per_task` flops'
// worth (`work_per_item` each): a decode step of one sequence (~1.5 M flops for
// a Mamba-2 layer) stays on the calling thread, where waking the pool costs
// more than it saves (and far more on a machine other processes keep busy).
template <typename F>
void parallel(int64_t items, int64_t work_per_item, F&& body) {
  constexpr int64_t work_per_task = 1 << 21;
  const int64_t grain = std::max<int64_t>(1, work_per_task / std::max<int64_t>(1, work_per_item));
  at::parallel_for(0, items, grain, [&](int64_t begin, int64_t end) { body(begin, end); });
}

}  // namespace

// float32 channel-last rows of width 2-4 (every model's conv) run the loop
// compiled for that width, whose items are blocks of 64 rows. bfloat16 rows stay
// on the row loop: there the register-tiled loop measured 1.1-1.5x slower
// (thread CPU time, Falcon-H1's and Mamba-2 2.7B's widths, 256 tokens).
void run_conv(const ConvArgs& args) {
  const CpuTable* t = active_table().load();
  ConvArgs a = args;
  const bool channel_last = a.x_sd == 1 && a.o_sd == 1;
  a.row_block =
      channel_last && a.width >= 2 && a.width <= 4 && a.dtype == DType::Float32 ? 64 : 0;
  if (a.row_block > 0) {
    parallel(a.batch * ((a.len + a.row_block - 1) / a.row_block), a.row_block * a.dim * a.width,
             [&](int64_t b, int64_t e) { t->conv(a, b, e); });
  } else if (channel_last) {
    parallel(a.batch * a.len, a.dim * a.width,
             [&](int64_t b, int64_t e) { t->conv(a, b, e); });
  } else {
    parallel(a.batch * a.dim, a.len * a.width,
             [&](int64_t b, int64_t e) { t->conv(a, b, e); });
  }
}

// A one-token step over a contiguous [B, D, S] state of width 4 (Transformers
// keeps 4 positions, the causal_conv1d package 3) runs the loops compiled for
// that shape, which vectorize across a block of channels.
void run_conv_update(const ConvUpdateArgs& args) {
  const CpuTable* t = active_table().load();
  ConvUpdateArgs a = args;
  const bool fixed = a.len == 1 && a.s_sl == 1 && a.s_sd == a.state_len && a.width == 4 &&
                     (a.state_len == 4 || a.state_len == 3);
  a.channel_block = fixed ? 256 : 0;
  if (fixed) {
    parallel(a.batch * ((a.dim + 255) / 256), 256 * 2 * a.width,
             [&](int64_t b, int64_t e) { t->conv_update(a, b, e); });
  } else {
    parallel(a.batch * a.dim, (a.len + a.state_len) * a.width,
             [&](int64_t b, int64_t e) { t->conv_update(a, b, e); });
  }
}

// A work item is a block of heads of one group (they share the chunk's C B^T):
// as many heads as keep at least two items per thread, at most 8 (their states,
// 8 x 32 KiB for Mamba-2, stay in L2).
void run_scan(const ScanArgs& args) {
  const CpuTable* t = active_table().load();
  ScanArgs a = args;
  const int64_t per_group = a.heads / a.groups;
  const int64_t rows = a.batch * a.groups;
  const int64_t want_items = 2 * static_cast<int64_t>(at::get_num_threads());
  const int64_t blocks = std::min(per_group, std::max<int64_t>(1, (want_items + rows - 1) / rows));
  a.head_block = std::min<int64_t>(8, (per_group + blocks - 1) / blocks);
  const int64_t items = rows * ((per_group + a.head_block - 1) / a.head_block);
  parallel(items, std::max<int64_t>(1, a.len) * a.head_block * a.headdim * a.dstate * 4,
           [&](int64_t b, int64_t e) { t->scan(a, b, e); });
}

void run_step(const StepArgs& a) {
  const CpuTable* t = active_table().load();
  parallel(a.batch * a.heads, a.headdim * a.dstate * 4,
           [&](int64_t b, int64_t e) { t->step(a, b, e); });
}

void run_selective_scan(const SelectiveScanArgs& a) {
  const CpuTable* t = active_table().load();
  parallel(a.batch * a.dim, a.len * a.dstate * 8,
           [&](int64_t b, int64_t e) { t->selective_scan(a, b, e); });
}

}  // namespace mamba_ssm

std::string cpu_capability() { return mamba_ssm::active_table().load()->capability; }

std::string set_cpu_capability(const std::string& capability) {
  const mamba_ssm::CpuTable* table = mamba_ssm::table_for(capability);
  TORCH_CHECK(table != nullptr, "set_cpu_capability: '", capability,
              "' is not available here (one of DEFAULT, AVX2, AVX512, AVX512_BF16 that this CPU "
              "supports; torch reports ",
              at::get_cpu_capability(), ")");
  return mamba_ssm::active_table().exchange(table)->capability;
}
