// The Metal ops: the same argument checks as every backend, then one compute
// encoder per call on torch's current MPS command buffer, so the kernels are
// ordered with the surrounding torch ops and torch decides when to commit.
//
// The shaders (activation.metal) are compiled to a metallib that the builder
// embeds in this library (EMBEDDED_METALLIB_HEADER names the generated header,
// EMBEDDED_METALLIB_NAMESPACE its namespace, holding metallib_data and
// metallib_data_len), so the variant ships one file and needs no path at run
// time. Pipeline states are built once per kernel and cached.
#include "../activation_common/op_checks.h"
#include "../torch-ext/torch_binding.h"
#include "params.h"

#include <torch/mps.h>

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#ifndef EMBEDDED_METALLIB_HEADER
// The builder compiles activation.metal and generates this header.
#error "EMBEDDED_METALLIB_HEADER is not defined: build the Metal part with the kernel builder"
#endif
#include EMBEDDED_METALLIB_HEADER

namespace activation_metal {
namespace {

id<MTLDevice> metal_device() {
  static id<MTLDevice> device = MTLCreateSystemDefaultDevice();
  TORCH_CHECK(device != nil, "activation: no Metal device found");
  return device;
}

id<MTLLibrary> library() {
  static id<MTLLibrary> lib = [] {
    // DISPATCH_DATA_DESTRUCTOR_DEFAULT copies the bytes, so no lifetime ties.
    dispatch_data_t data = dispatch_data_create(EMBEDDED_METALLIB_NAMESPACE::metallib_data,
                                                EMBEDDED_METALLIB_NAMESPACE::metallib_data_len,
                                                nullptr, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    NSError* error = nil;
    id<MTLLibrary> loaded = [metal_device() newLibraryWithData:data error:&error];
    TORCH_CHECK(loaded != nil, "activation: cannot load the embedded Metal library: ",
                error ? error.localizedDescription.UTF8String : "unknown error");
    return loaded;
  }();
  return lib;
}

id<MTLComputePipelineState> pipeline(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, id<MTLComputePipelineState>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(name);
  if (found != cache.end()) {
    return found->second;
  }
  id<MTLFunction> function =
      [library() newFunctionWithName:[NSString stringWithUTF8String:name.c_str()]];
  TORCH_CHECK(function != nil, "activation: the Metal library has no kernel '", name,
              "' (bfloat16 kernels need Metal 3.1, macOS 14 or newer)");
  NSError* error = nil;
  id<MTLComputePipelineState> state =
      [metal_device() newComputePipelineStateWithFunction:function error:&error];
  TORCH_CHECK(state != nil, "activation: cannot build the Metal pipeline for '", name, "': ",
              error ? error.localizedDescription.UTF8String : "unknown error");
  cache.emplace(name, state);
  return state;
}

// An MPS tensor's storage pointer is its MTLBuffer.
id<MTLBuffer> buffer_of(const at::Tensor& t) {
  return (__bridge id<MTLBuffer>)(const_cast<void*>(t.storage().data()));
}

const char* dtype_name(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::kHalf: return "half";
    case c10::kBFloat16: return "bfloat";
    default: return "float";  // check_common allowed nothing else
  }
}

// Encodes `kernel` over `grid` threads; `params` (gated ops) goes to buffer 2.
void encode(const std::string& kernel, const at::Tensor& input, const at::Tensor& out,
            const GatedParams* params, MTLSize grid) {
  id<MTLComputePipelineState> state = pipeline(kernel);
  id<MTLCommandBuffer> command_buffer = torch::mps::get_command_buffer();
  TORCH_CHECK(command_buffer != nil, "activation: torch has no MPS command buffer");
  dispatch_queue_t queue = torch::mps::get_dispatch_queue();
  id<MTLBuffer> in_buffer = buffer_of(input);
  id<MTLBuffer> out_buffer = buffer_of(out);
  const NSUInteger in_offset = input.storage_offset() * input.element_size();
  const NSUInteger out_offset = out.storage_offset() * out.element_size();
  const GatedParams gated = params ? *params : GatedParams{};
  const bool has_params = params != nullptr;
  const NSUInteger width = std::min<NSUInteger>(state.maxTotalThreadsPerThreadgroup, grid.width);
  // Nothing in the block may throw: exceptions must not cross dispatch_sync.
  dispatch_sync(queue, ^{
    id<MTLComputeCommandEncoder> encoder = [command_buffer computeCommandEncoder];
    [encoder setComputePipelineState:state];
    [encoder setBuffer:in_buffer offset:in_offset atIndex:0];
    [encoder setBuffer:out_buffer offset:out_offset atIndex:1];
    if (has_params) {
      [encoder setBytes:&gated length:sizeof(gated) atIndex:2];
    }
    // Non-uniform threadgroups: exactly `grid` threads run, no bounds checks needed.
    [encoder dispatchThreads:grid threadsPerThreadgroup:MTLSizeMake(width, 1, 1)];
    [encoder endEncoding];
    torch::mps::commit();
  });
}

void check_common(const char* op, const at::Tensor& out, const at::Tensor& input) {
  activation_common::check_tensors(op, out, input, c10::DeviceType::MPS, "MPS",
                                   {c10::kFloat, c10::kBFloat16, c10::kHalf},
                                   "float32, bfloat16 or float16");
}

constexpr int64_t kMaxGrid = std::numeric_limits<uint32_t>::max();

void run_gated(const char* op, at::Tensor& out, const at::Tensor& input, const char* act,
               bool act_on_second, double threshold = 0.0) {
  check_common(op, out, input);
  const int64_t d = activation_common::check_gated_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  const int64_t rows = input.numel() / (2 * d);
  TORCH_CHECK(d <= kMaxGrid && rows <= kMaxGrid, op,
              ": the Metal kernels take at most 2^32 - 1 rows and columns, got ", rows, " x ",
              d);
  const at::Tensor x = input.contiguous();
  const GatedParams params{static_cast<uint32_t>(d), act_on_second ? 1u : 0u,
                           static_cast<float>(threshold)};
  const std::string kernel = std::string("gated_") + act + "_" + dtype_name(x);
  activation_common::into(out, [&](at::Tensor& dst) {
    encode(kernel, x, dst, &params,
           MTLSizeMake(static_cast<NSUInteger>(d), static_cast<NSUInteger>(rows), 1));
  });
}

void run_unary(const char* op, at::Tensor& out, const at::Tensor& input, const char* act) {
  check_common(op, out, input);
  activation_common::check_unary_shapes(op, out, input);
  if (out.numel() == 0) {
    return;
  }
  TORCH_CHECK(input.numel() <= kMaxGrid, op,
              ": the Metal kernels take at most 2^32 - 1 elements, got ", input.numel());
  const at::Tensor x = input.contiguous();
  const std::string kernel = std::string("unary_") + act + "_" + dtype_name(x);
  activation_common::into(out, [&](at::Tensor& dst) {
    encode(kernel, x, dst, nullptr, MTLSizeMake(static_cast<NSUInteger>(x.numel()), 1, 1));
  });
}

}  // namespace
}  // namespace activation_metal

void silu_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_gated("silu_and_mul", out, input, "silu", false);
}

void mul_and_silu(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_gated("mul_and_silu", out, input, "silu", true);
}

void gelu_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_gated("gelu_and_mul", out, input, "gelu", false);
}

void gelu_tanh_and_mul(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_gated("gelu_tanh_and_mul", out, input, "gelu_tanh", false);
}

void fatrelu_and_mul(at::Tensor& out, const at::Tensor& input, double threshold) {
  activation_metal::run_gated("fatrelu_and_mul", out, input, "fatrelu", false, threshold);
}

void silu(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_unary("silu", out, input, "silu");
}

void gelu(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_unary("gelu", out, input, "gelu");
}

void gelu_tanh(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_unary("gelu_tanh", out, input, "gelu_tanh");
}

// gelu_fast and gelu_new are the tanh approximation written two other ways.
void gelu_fast(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_unary("gelu_fast", out, input, "gelu_tanh");
}

void gelu_new(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_unary("gelu_new", out, input, "gelu_tanh");
}

void gelu_quick(at::Tensor& out, const at::Tensor& input) {
  activation_metal::run_unary("gelu_quick", out, input, "gelu_quick");
}
