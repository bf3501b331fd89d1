#include "foundry/Runtime.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "foundry/CoopMatProbe.h"
#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/StorageFormat.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/PipelineCache.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

void configureLogging(const RuntimeOptions& options) {
  static const bool once = [] {
    auto logger = spdlog::stderr_color_mt("foundry");
    logger->set_pattern("[foundry %^%l%$] %v");
    spdlog::set_default_logger(logger);
    return true;
  }();
  (void)once;
  spdlog::set_level(spdlog::level::from_str(options.logLevel));
}

std::string diskCacheDirectory(const RuntimeOptions& options) {
  return options.cacheDir.empty() ? DiskCache::defaultDirectory(options.xdgCacheHome, options.homeDir).string()
                                  : options.cacheDir;
}

Runtime::Runtime(RuntimeOptions options) : options_(std::move(options)) {
  options_.validate();
  configureLogging(options_);
  device_ = std::make_shared<VulkanDevice>(std::make_shared<VulkanInstance>(options_.validation), options_.device,
                                            options_.fieldOf("FOUNDRY_DEVICE"));
  start();
}

Runtime::Runtime(RuntimeOptions options, std::shared_ptr<VulkanDevice> device)
    : options_(std::move(options)), device_(std::move(device)) {
  options_.validate();
  configureLogging(options_);
  if (!device_) throw InternalError("a Runtime needs a device");
  start();
}

void Runtime::start() {
  for (const auto& [k, v] : options_.describe()) spdlog::debug("knob {} = {}", k, v);
  snippets_ = SnippetLibrary::select(options_.kernelDir);
  disk_ = std::make_shared<DiskCache>(diskCacheDirectory(options_));
  auto compiler = std::make_shared<ShaderCompiler>(ShaderCompiler::Optimization::Performance,
                                                   options_.glslcCommand(device_->info().coopMat2));
  if (device_->info().coopMat2 && !compiler->coopMat2()) {
    spdlog::debug("device '{}' has VK_NV_cooperative_matrix2 but no compiler for it here: {}", device_->info().name,
                  compiler->external() ? compiler->external()->problem() : "FOUNDRY_GLSLC is empty");
    device_->clearCoopMat2();
  } else if (device_->info().coopMat2Bf16 && !compiler->coopMat2Bf16()) {
    spdlog::debug("device '{}' multiplies bf16 matrices but the coopmat2 compiler cannot: {}", device_->info().name,
                  compiler->external()->bf16Problem());
    device_->clearCoopMat2Bf16();
  }
  kernels_ = std::make_shared<KernelCache>(compiler, disk_, options_.dumpKernels);
  pipelines_ = std::make_shared<PipelineCache>(*device_, kernels_, disk_);
  if (device_->coopMatEnabled()) {
    // Where the accumulator layout is the quad pattern, prefill keeps its softmax in registers.
    try {
      const CoopMatProbeResult probe = runCoopMatProbe(*this);
      device_->setCoopMatLayout(quadLayoutFrom(probe), quadLayoutFrom(probe, 8), quadLayoutFrom(probe, 16, true));
    } catch (const Error& e) {
      spdlog::warn("cooperative-matrix layout probe failed ({}); prefill takes the portable route", e.what());
    }
    spdlog::debug("cooperative-matrix accumulator layout: {}",
                  device_->info().coopMatLayout.quad() ? "quad" : "unknown");
  }
}

// Members go in reverse order: the pipeline cache (saved) before the device. Buffers, pipelines and
// dispatchers that users still hold keep the device alive until they go.
Runtime::~Runtime() = default;

const DeviceInfo& Runtime::info() const { return device_->info(); }

std::unique_ptr<VulkanDispatcher> Runtime::dispatcher() {
  return std::make_unique<VulkanDispatcher>(device_, pipelines_);
}

void Runtime::wait(Submission submission) {
  device_->requireSubmitted(submission.value, submission.device);
  device_->wait(submission.value);
}

Tensor Runtime::allocate(const Tensor& shape) {
  if (shape.dtype == DType::I32) {
    throw UserError("dtype", fmt::format("'{}': i32 tensors are host-side only; accepted on a device: f16, bf16, f32, "
                                         "u32, int8, q8_0", shape.name));
  }
  Tensor t = shape;
  t.strides = Tensor::packedStrides(t.dims);
  t.offset = 0;
  t.buffer = std::make_shared<Buffer>(*device_, t.spanBytes(), t.name);
  t.scales.reset();
  if (storageFormat(t.dtype).blocks.version && !storageFormat(t.dtype).blocks.inlineScales) {
    t.scales = std::make_shared<Tensor>(allocate(scalesShape(t)));
  }
  return t;
}

Tensor Runtime::allocate(std::string name, DType dtype, std::vector<std::int64_t> dims, Layout layout) {
  return allocate(Tensor::describe(std::move(name), dtype, std::move(dims), layout));
}

namespace {

// The data API's checks on the caller's tensor (the same a dispatch makes).
void requireMemory(const Tensor& t, const VulkanDevice& device, const char* what) {
  if (const std::string why = memoryProblem(t, device); !why.empty()) {
    throw UserError("tensor", fmt::format("{} '{}' ({}): it {}", what, t.name, t.shapeString(), why));
  }
}

}  // namespace

void Runtime::upload(const Tensor& tensor, std::span<const float> values) {
  requireMemory(tensor, *device_, "upload to");
  if (!tensor.packed()) {
    throw UserError("tensor", fmt::format("upload to '{}' ({}): values are uploaded into packed tensors only",
                                          tensor.name, tensor.shapeString()));
  }
  if (values.size() != static_cast<std::size_t>(tensor.numel())) {
    throw UserError("values", fmt::format("upload to '{}' ({}) got {} values; it holds {}", tensor.name,
                                          tensor.shapeString(), values.size(), tensor.numel()));
  }
  if (tensor.dtype == DType::U32) {
    for (const float v : values) {
      if (!(v >= 0.0f && v <= 16777216.0f && v == std::floor(v))) {
        throw UserError("values", fmt::format("upload to u32 tensor '{}' of {}; accepted: whole numbers from 0 to 2^24 "
                                              "(larger words: the u32 overload)", tensor.name, v));
      }
    }
  }
  if (quantized(tensor.dtype)) {
    const QuantizedBytes q = quantizeKv(values, tensor);
    tensor.buffer->upload(q.values, storageBytes(tensor.dtype, tensor.offset));
    if (tensor.scales) tensor.scales->buffer->upload(q.scales, storageBytes(DType::F16, tensor.scales->offset));
    return;
  }
  const auto bytes = encodeElements(values, tensor.dtype);
  tensor.buffer->upload(bytes, tensor.offset * dtypeBytes(tensor.dtype));
}

void Runtime::upload(const Tensor& tensor, std::span<const std::uint32_t> words) {
  requireMemory(tensor, *device_, "word upload to");
  if (!tensor.packed() || tensor.dtype != DType::U32 || words.size() != static_cast<std::size_t>(tensor.numel())) {
    throw UserError("words", fmt::format("word upload to '{}' ({}) of {} words needs a packed u32 tensor of as many",
                                         tensor.name, tensor.shapeString(), words.size()));
  }
  tensor.buffer->upload(std::as_bytes(words), tensor.offset * 4);
}

std::vector<float> Runtime::download(const Tensor& tensor) {
  requireMemory(tensor, *device_, "download of");
  if (quantized(tensor.dtype) && !tensor.packed()) {
    throw UserError("tensor", fmt::format("download of '{}' ({}): a quantized cache is downloaded whole (packed)",
                                          tensor.name, tensor.shapeString()));
  }
  std::vector<std::byte> bytes(tensor.spanBytes());
  tensor.buffer->download(bytes, storageBytes(tensor.dtype, tensor.offset));
  if (quantized(tensor.dtype)) {
    QuantizedBytes q{std::move(bytes), {}};
    if (tensor.scales) {
      q.scales.resize(tensor.scales->spanBytes());
      tensor.scales->buffer->download(q.scales, storageBytes(DType::F16, tensor.scales->offset));
    }
    return dequantizeKv(q, tensor);
  }
  std::vector<float> span = decodeElements(bytes, tensor.dtype);
  if (tensor.packed()) return span;
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  std::vector<std::int64_t> index(tensor.rank(), 0);
  for (auto& value : out) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < index.size(); ++d) at += index[d] * tensor.strides[d];
    value = span[static_cast<std::size_t>(at)];
    for (std::size_t d = index.size(); d-- > 0 && ++index[d] == tensor.dims[d];) index[d] = 0;
  }
  return out;
}

void Runtime::poison(const Tensor& tensor) {
  requireMemory(tensor, *device_, "poison of");
  // The format's quiet NaN (int8: the code -128 the quantizer never writes, and NaN scales).
  tensor.buffer->fill(storageFormat(tensor.dtype).fillWord);
  if (tensor.scales) poison(*tensor.scales);
}

}  // namespace foundry
