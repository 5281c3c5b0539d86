// See dispatch.h. Buckets round the sequence lengths up to a power of two (the
// speed of either side changes smoothly with them); everything else that
// decides which side is faster is part of the bucket exactly: dtype, batch,
// head counts and dims, causality, the thread count and our loop copy.
#include "dispatch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

namespace flash_attn2_cpu {
namespace {

enum class Mode { kAuto, kKernel, kTorch };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kKernel:
      return "kernel";
    case Mode::kTorch:
      return "torch";
    default:
      return "auto";
  }
}

Mode parse_mode(const std::string& text, const char* where) {
  if (text == "auto") {
    return Mode::kAuto;
  }
  if (text == "kernel") {
    return Mode::kKernel;
  }
  if (text == "torch") {
    return Mode::kTorch;
  }
  TORCH_CHECK(false, where, ": '", text,
              "' is not a dispatch mode; choose auto (time both, keep the faster), kernel "
              "(always these loops) or torch (torch's sdpa wherever it computes the same)");
  return Mode::kAuto;
}

std::atomic<Mode>& mode() {
  static std::atomic<Mode> current{[] {
    const char* env = std::getenv("FLASH_ATTN2_DISPATCH");
    return env == nullptr || *env == '\0' ? Mode::kAuto
                                          : parse_mode(env, "FLASH_ATTN2_DISPATCH");
  }()};
  return current;
}

int64_t bucket(int64_t n) {
  int64_t b = 1;
  while (b < n) {
    b *= 2;
  }
  return b;
}

using Key = std::array<int64_t, 10>;

struct Decision {
  bool torch;
  double kernel_s;
  double torch_s;
  std::string capability;
};

struct Decisions {
  std::mutex lock;
  std::map<Key, Decision> by_key;
};

Decisions& decisions() {
  static Decisions all;
  return all;
}

Key key_of(const at::Tensor& q, const flash_attn2::Problem& p, const Request& request,
           const char* capability) {
  return {static_cast<int64_t>(q.scalar_type()),
          // The loop tables' names are static strings: their address names them.
          static_cast<int64_t>(reinterpret_cast<intptr_t>(capability)),
          p.batch,
          p.heads_q,
          p.heads_kv,
          bucket(p.seq_q),
          bucket(p.seq_k),
          p.head_dim,
          request.causal ? 1 : 0,
          at::get_num_threads()};
}

std::optional<bool> lookup(const Key& key) {
  Decisions& all = decisions();
  std::lock_guard<std::mutex> guard(all.lock);
  const auto found = all.by_key.find(key);
  return found == all.by_key.end() ? std::nullopt : std::optional<bool>(found->second.torch);
}

void record(const Key& key, const Decision& decision) {
  Decisions& all = decisions();
  std::lock_guard<std::mutex> guard(all.lock);
  all.by_key.emplace(key, decision);
}

double seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Interleaved, each side's best: one warm-up run each (oneDNN generates its
// kernels, pages are touched), then measured rounds until one side is clearly
// (1.5x) ahead or three rounds are done. `ours` runs last, so `out` holds its result.
Decision measure(const std::function<void()>& theirs, const std::function<void()>& ours,
                 const char* capability) {
  constexpr int kRounds = 3;
  constexpr double kClear = 1.5;
  seconds(theirs);
  seconds(ours);
  double torch_s = 1e300;
  double kernel_s = 1e300;
  for (int round = 0; round < kRounds; ++round) {
    torch_s = std::min(torch_s, seconds(theirs));
    kernel_s = std::min(kernel_s, seconds(ours));
    if (torch_s > kClear * kernel_s || kernel_s > kClear * torch_s) {
      break;
    }
  }
  return {torch_s < kernel_s, kernel_s, torch_s, capability};
}

}  // namespace

bool torch_equivalent(const flash_attn2::Problem& p, const Request& request) {
  const bool aligned = p.window_right < 0 || (p.window_right == 0 && (p.seq_q == p.seq_k ||
                                                                      p.seq_q == 1));
  return !request.has_mask && request.softcap == 0.0 && p.window_left < 0 && aligned &&
         p.head_dim == p.head_dim_v && p.seq_q > 0 && p.seq_k > 0;
}

at::Tensor run_faster(at::Tensor* out, const at::Tensor& q, const at::Tensor& k,
                      const at::Tensor& v, const flash_attn2::Problem& p,
                      const Request& request, const char* capability,
                      const std::function<void(at::Tensor&)>& ours) {
  at::Tensor fresh;
  auto into = [&]() -> at::Tensor& {
    if (out != nullptr) {
      return *out;
    }
    if (!fresh.defined()) {
      fresh = flash_attn2::empty_output(q, v);
    }
    return fresh;
  };
  const Mode current = mode().load();
  if (current == Mode::kKernel || !torch_equivalent(p, request)) {
    ours(into());
    return into();
  }
  // Causal with one query (a decode step) sees every key: not causal for torch.
  const bool is_causal = p.window_right == 0 && p.seq_q > 1;
  auto torch_attention = [&] {
    return at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, is_causal,
                                            request.scale, /*enable_gqa=*/true);
  };
  bool use_torch = current == Mode::kTorch;
  if (current == Mode::kAuto) {
    const Key key = key_of(q, p, request, capability);
    const std::optional<bool> known = lookup(key);
    if (!known.has_value()) {
      at::Tensor& dst = into();
      record(key, measure([&] { torch_attention(); }, [&] { ours(dst); }, capability));
      return dst;  // it holds our result
    }
    use_torch = *known;
  }
  if (!use_torch) {
    ours(into());
    return into();
  }
  at::Tensor theirs = torch_attention();
  if (out == nullptr) {
    if (std::optional<at::Tensor> as_is = flash_attn2::in_output_layout(q, theirs)) {
      return *as_is;  // sdpa's own memory, in the op's (and its fake's) layout
    }
  }
  into().copy_(theirs);
  return into();
}

std::string set_dispatch(const std::string& text) {
  return mode_name(mode().exchange(parse_mode(text, "set_attention_dispatch")));
}

std::vector<std::string> dispatch_decisions() {
  Decisions& all = decisions();
  std::lock_guard<std::mutex> guard(all.lock);
  std::vector<std::string> lines;
  for (const auto& [key, decision] : all.by_key) {
    std::ostringstream line;
    line << c10::toString(static_cast<c10::ScalarType>(key[0])) << " [" << key[2] << ", "
         << key[3] << "/" << key[4] << " heads, seq_q<=" << key[5] << ", seq_k<=" << key[6]
         << ", d " << key[7] << "]" << (key[8] ? " causal" : "") << ", " << key[9]
         << " threads, loops " << decision.capability << ": "
         << (decision.torch ? "torch sdpa" : "kernel") << " (kernel "
         << decision.kernel_s * 1e3 << " ms, sdpa " << decision.torch_s * 1e3 << " ms)";
    lines.push_back(line.str());
  }
  return lines;
}

}  // namespace flash_attn2_cpu
