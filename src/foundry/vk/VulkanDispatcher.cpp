#include "foundry/vk/VulkanDispatcher.h"

#include <algorithm>
#include <exception>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/vk/Barrier.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Check.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/Handle.h"
#include "foundry/vk/PipelineCache.h"

namespace foundry {

namespace {
constexpr std::uint32_t kQueriesPerPool = 512;
constexpr std::uint32_t kSetsPerPool = 256;
constexpr unsigned kRead = 1, kWrite = 2;

constexpr VkDeviceSize kParameterChunkBytes = 64 * 1024;
}  // namespace

// What a Recording::Frame (declared in the header) holds has a name of its own, not the anonymous
// namespace's: GCC refuses such a field (-Wsubobject-linkage) where this file is part of a unity source.
namespace dispatch_detail {

/// A buffer range as a descriptor sees it: what a replayed dispatch must bind again.
struct BoundRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, range = 0;
  bool operator==(const BoundRange&) const = default;
};

/// Where a parameterized dispatch's grid (VkDispatchIndirectCommand) and push constants live.
struct ParameterSlot {
  std::shared_ptr<Buffer> buffer;  ///< null: the dispatch is not parameterized
  VkDeviceSize grid = 0, push = 0;
};

struct Pending {
  std::string kernel;
  std::uint32_t query = 0;  ///< first of two timestamps, in queryPools order
  std::shared_ptr<const Pipeline> pipeline;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::string hash;                ///< the kernel's (not its parameter-block variant's)
  std::vector<BoundRange> ranges;  ///< in binding order
  ParameterSlot parameters;
};

}  // namespace dispatch_detail

using dispatch_detail::BoundRange;
using dispatch_detail::ParameterSlot;
using dispatch_detail::Pending;

namespace {

/// A tensor checked against the binding slot it is bound to.
struct Bound {
  const BindingSlot* slot;
  const Tensor* tensor;
  VkDeviceSize offset, range;
};

/// Every binding of `kernel` resolved to a buffer range, with what can fail checked: alignment, the
/// buffer's size, the device's range limit, written bindings overlapping others; and the grid.
std::vector<Bound> resolveBindings(const KernelSource& kernel, const Arguments& args, const VulkanDevice& dev, Grid grid) {
  const auto& caps = dev.info();
  std::vector<Bound> bound;
  for (const auto& slot : kernel.layout.bindings) {
    const Tensor& t = args.tensors().at(slot.name);
    // The binding's name is the call's parameter ("q", "k_cache"); the kernel is said in the message.
    const auto fail = [&](const std::string& what) {
      throw UserError(slot.name, fmt::format("{} (kernel {})", what, kernel.name));
    };
    if (const std::string why = memoryProblem(t, dev); !why.empty()) {
      fail(fmt::format("tensor '{}' ({}) bound as '{}' {}", t.name, t.shapeString(), slot.name, why));
    }
    const VkDeviceSize offset = storageBytes(t.dtype, t.offset);
    const VkDeviceSize span = t.spanBytes();
    if (offset % dev.storageOffsetAlignment() != 0) {
      fail(fmt::format("tensor '{}' starts at byte {}, not a multiple of the device's storage offset alignment {}",
                       t.name, offset, dev.storageOffsetAlignment()));
    }
    if (span > caps.maxStorageBufferRange) {
      throw UnsupportedError(fmt::format("tensor '{}' ({}) spans {} bytes; device '{}' binds at most {} bytes per "
                                         "storage buffer", t.name, t.shapeString(), span, caps.name,
                                         caps.maxStorageBufferRange));
    }
    const VkDeviceSize range = std::min<VkDeviceSize>({(span + 15) / 16 * 16, t.buffer->size() - offset,
                                                       caps.maxStorageBufferRange});
    bound.push_back({&slot, &t, offset, std::max<VkDeviceSize>(range, 4)});
  }
  // Kernels declare their buffers `restrict`: a written binding must not share an element with any
  // other binding, nor name one element at two positions (two invocations would write it).
  for (const auto& b : bound) {
    if (b.slot->access != Access::ReadOnly && selfOverlapping(*b.tensor)) {
      throw UserError(b.slot->name, fmt::format("tensor '{}' ({}, strides [{}]) is written and names one element at "
                                                "two positions (kernel {})", b.tensor->name, b.tensor->shapeString(),
                                                fmt::join(b.tensor->strides, ", "), kernel.name));
    }
  }
  for (std::size_t i = 0; i < bound.size(); ++i) {
    for (std::size_t j = i + 1; j < bound.size(); ++j) {
      const auto &a = bound[i], &b = bound[j];
      const bool written = a.slot->access != Access::ReadOnly || b.slot->access != Access::ReadOnly;
      if (written && viewsOverlap(*a.tensor, *b.tensor)) {
        const std::string& blamed = b.slot->access != Access::ReadOnly ? b.slot->name : a.slot->name;
        throw UserError(blamed, fmt::format("bindings '{}' and '{}' overlap in buffer '{}' and one is written (kernel {})",
                                            a.slot->name, b.slot->name, a.tensor->buffer->name(), kernel.name));
      }
    }
  }
  const auto& maxGroups = dev.maxWorkgroupCount();
  if (grid.x > maxGroups[0] || grid.y > maxGroups[1] || grid.z > maxGroups[2]) {
    throw UnsupportedError(fmt::format("kernel {}: grid {}x{}x{} exceeds the device's {}x{}x{} workgroups", kernel.name,
                                       grid.x, grid.y, grid.z, maxGroups[0], maxGroups[1], maxGroups[2]));
  }
  return bound;
}

std::vector<BoundRange> rangesOf(const std::vector<Bound>& bound) {
  std::vector<BoundRange> out;
  for (const auto& b : bound) out.push_back({b.tensor->buffer->handle(), b.offset, b.range});
  return out;
}

/// Writes a parameterized dispatch's grid and push constants where its recording reads them.
void writeParameters(const ParameterSlot& slot, Grid grid, const std::vector<std::byte>& push) {
  const std::uint32_t groups[3] = {grid.x, grid.y, grid.z};
  slot.buffer->upload(std::as_bytes(std::span(groups)), slot.grid);
  slot.buffer->upload(push, slot.push);
}

}  // namespace

/// One command buffer with the descriptor sets, timestamp queries and objects its dispatches use.
/// A dispatcher keeps a few, so it can record one while others run; a Recording keeps one for good.
struct Recording::Frame {
  std::shared_ptr<VulkanDevice> device;
  Owned<VkDevice, VkCommandPool> pool;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  std::vector<Owned<VkDevice, VkDescriptorPool>> descriptorPools;
  std::size_t descriptorPool = 0;
  std::vector<Owned<VkDevice, VkQueryPool>> queryPools;
  std::uint32_t queriesUsed = 0;
  bool recording = false;
  std::vector<Pending> pending;
  std::map<VkBuffer, unsigned> touched;  ///< accesses since the last barrier: 1 read, 2 write
  std::uint64_t submitted = 0;           ///< timeline value of its last submission
  bool parameterized = false;            ///< push constants and grids read from parameter buffers
  std::vector<std::shared_ptr<Buffer>> parameterChunks;  ///< host-visible, kept across resets
  std::size_t parameterChunk = 0;
  VkDeviceSize parameterUsed = 0;         ///< in parameterChunks[parameterChunk]

  explicit Frame(std::shared_ptr<VulkanDevice> d) : device(std::move(d)) {
    VkCommandPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    poolInfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    poolInfo.queueFamilyIndex = device->queueFamily();
    pool = createOwned<VkCommandPool>(device->handle(), vkCreateCommandPool, poolInfo, vkDestroyCommandPool,
                                      "vkCreateCommandPool");
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool.get();
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    FOUNDRY_VK(vkAllocateCommandBuffers(device->handle(), &alloc, &cmd));  // freed with the pool
  }
  ~Frame() {
    // A command buffer may still run: its objects go only once it is done.
    try {
      device->wait(submitted);
    } catch (const std::exception& e) {
      spdlog::warn("waiting for a command buffer before freeing it failed: {}", e.what());
    }
    if (recording) vkEndCommandBuffer(cmd);
  }

  void begin() {
    if (recording) return;
    VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    FOUNDRY_VK(vkBeginCommandBuffer(cmd, &info));
    recording = true;
    // Work submitted earlier (other frames, uploads, an earlier run of this one) comes first in
    // submission order; this orders its memory accesses before this buffer's.
    memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                  VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                      VK_ACCESS_TRANSFER_WRITE_BIT);
  }

  /// Ends recording with shader writes made visible to the host and to later transfers.
  void end() {
    memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                  VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                      VK_ACCESS_TRANSFER_WRITE_BIT);
    FOUNDRY_VK(vkEndCommandBuffer(cmd));
    recording = false;
  }

  VkDescriptorSet allocateSet(VkDescriptorSetLayout layout) {
    for (;;) {
      if (descriptorPool == descriptorPools.size()) {
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8};
        VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        info.maxSets = kSetsPerPool;
        info.poolSizeCount = 1;
        info.pPoolSizes = &size;
        descriptorPools.push_back(createOwned<VkDescriptorPool>(device->handle(), vkCreateDescriptorPool, info,
                                                                vkDestroyDescriptorPool, "vkCreateDescriptorPool"));
      }
      VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      alloc.descriptorPool = descriptorPools[descriptorPool].get();
      alloc.descriptorSetCount = 1;
      alloc.pSetLayouts = &layout;
      VkDescriptorSet set = VK_NULL_HANDLE;
      const VkResult r = vkAllocateDescriptorSets(device->handle(), &alloc, &set);
      if (r == VK_SUCCESS) return set;
      if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) FOUNDRY_VK(r);
      ++descriptorPool;
    }
  }

  std::uint32_t nextQueryPair() {
    const std::uint32_t at = queriesUsed / kQueriesPerPool;
    if (queriesUsed % kQueriesPerPool == 0) {
      if (at == queryPools.size()) {
        VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        info.queryType = VK_QUERY_TYPE_TIMESTAMP;
        info.queryCount = kQueriesPerPool;
        queryPools.push_back(createOwned<VkQueryPool>(device->handle(), vkCreateQueryPool, info, vkDestroyQueryPool,
                                                      "vkCreateQueryPool"));
      }
      vkCmdResetQueryPool(cmd, queryPools[at].get(), 0, kQueriesPerPool);
    }
    const std::uint32_t q = queriesUsed;
    queriesUsed += 2;
    return q;
  }

  /// Room for a dispatch's grid and `pushBytes` of push constants, each at the device's storage
  /// offset alignment.
  ParameterSlot allocateParameters(std::uint32_t pushBytes) {
    const VkDeviceSize align = std::max<VkDeviceSize>(device->storageOffsetAlignment(), 16);
    const auto up = [&](VkDeviceSize n) { return (n + align - 1) / align * align; };
    const VkDeviceSize need = up(3 * sizeof(std::uint32_t)) + up(std::max<std::uint32_t>(pushBytes, 4));
    if (parameterChunk < parameterChunks.size() && parameterUsed + need > parameterChunks[parameterChunk]->size()) {
      ++parameterChunk;
      parameterUsed = 0;
    }
    if (parameterChunk == parameterChunks.size()) {
      parameterChunks.push_back(std::make_shared<Buffer>(*device, std::max(kParameterChunkBytes, need),
                                                         "dispatch parameters", BufferUse::Parameters));
    }
    ParameterSlot slot{parameterChunks[parameterChunk], parameterUsed, parameterUsed + up(3 * sizeof(std::uint32_t))};
    parameterUsed += need;
    return slot;
  }

  /// The timings of its last run (which has finished).
  SubmitResult results(bool timestamps) const {
    SubmitResult result;
    if (!timestamps || queriesUsed == 0) {
      for (const auto& p : pending) result.dispatches.push_back({p.kernel, 0.0});
      return result;
    }
    std::vector<std::uint64_t> ticks(queriesUsed);
    for (std::uint32_t first = 0; first < queriesUsed; first += kQueriesPerPool) {
      const std::uint32_t count = std::min(kQueriesPerPool, queriesUsed - first);
      FOUNDRY_VK(vkGetQueryPoolResults(device->handle(), queryPools[first / kQueriesPerPool].get(), 0, count,
                                       count * sizeof(std::uint64_t), ticks.data() + first, sizeof(std::uint64_t),
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    }
    const std::uint64_t mask =
        device->timestampValidBits() >= 64 ? ~0ull : ((1ull << device->timestampValidBits()) - 1);
    const double ns = device->timestampPeriodNs();
    std::uint64_t first = ~0ull, last = 0;
    for (const auto& p : pending) first = std::min(first, ticks[p.query] & mask);
    for (const auto& p : pending) {
      const std::uint64_t t0 = ticks[p.query] & mask, t1 = ticks[p.query + 1] & mask;
      last = std::max(last, t1);
      auto us = [&](std::uint64_t a, std::uint64_t b) { return b >= a ? static_cast<double>(b - a) * ns / 1000.0 : 0.0; };
      result.dispatches.push_back({p.kernel, us(t0, t1), us(first, t0), us(first, t1)});
    }
    result.totalGpuMicros = last >= first ? static_cast<double>(last - first) * ns / 1000.0 : 0.0;
    return result;
  }

  /// Ready to record again (its last run has finished).
  void reset() {
    if (recording) {
      vkEndCommandBuffer(cmd);
      recording = false;
    }
    pending.clear();
    touched.clear();
    queriesUsed = 0;
    parameterized = false;
    parameterChunk = 0;
    parameterUsed = 0;
    for (auto& p : descriptorPools) vkResetDescriptorPool(device->handle(), p.get(), 0);
    descriptorPool = 0;
    vkResetCommandBuffer(cmd, 0);
  }
};

Recording::Recording(std::shared_ptr<Frame> frame) : frame_(std::move(frame)) {}
Recording::~Recording() = default;
std::size_t Recording::dispatches() const { return frame_->pending.size(); }
bool Recording::parameterized() const { return frame_->parameterized; }

struct VulkanDispatcher::Impl {
  std::shared_ptr<VulkanDevice> device;
  std::shared_ptr<PipelineCache> pipelines;
  std::shared_ptr<Recording::Frame> current;              ///< being recorded (null: none yet)
  std::vector<std::shared_ptr<Recording::Frame>> spare;   ///< finished, ready to record again
  std::map<std::uint64_t, std::shared_ptr<Recording::Frame>> running;  ///< by timeline value
  std::map<std::uint64_t, bool> reusable;                 ///< false for a Recording's frame
  std::map<std::uint64_t, SubmitResult> finished;  ///< timings of frames taken back before their wait
  bool timestamps = false;
  SubmitResult flushed;  ///< what flush() ran, for the next submit() to report
  int uncaughtAtCreation = 0;
  std::uint64_t barriers = 0;
  std::map<std::string, std::shared_ptr<const KernelSource>> variants;  ///< parameter-block kernels by hash

  const KernelSource& parameterVariant(const KernelSource& kernel) {
    auto& v = variants[kernel.hash];
    if (!v) v = std::make_shared<const KernelSource>(parameterBlockVariant(kernel));
    return *v;
  }

  /// At most this many finished submissions keep their timings for a later wait (the oldest go first).
  static constexpr std::size_t kKeptResults = 64;

  /// Takes back the frames whose work the device has finished, keeping their timings for a wait: a
  /// program that waits through Runtime::wait, or never, must not hold every command buffer and bound
  /// buffer it ever submitted until the dispatcher dies.
  void reclaim() {
    // One queue: values finish in the order they were submitted.
    while (!running.empty() && device->reached(running.begin()->first)) {
      const std::uint64_t value = running.begin()->first;
      finished[value] = retire(running.begin());
    }
    while (finished.size() > kKeptResults) finished.erase(finished.begin());
  }

  /// A running frame whose work has finished out of `running`: its timings, and the frame back to the
  /// spare list unless a Recording owns it.
  SubmitResult retire(std::map<std::uint64_t, std::shared_ptr<Recording::Frame>>::iterator it) {
    const std::uint64_t value = it->first;
    auto f = std::move(it->second);
    running.erase(it);
    const bool ours = reusable[value];
    reusable.erase(value);
    SubmitResult result = f->results(timestamps);
    if (ours) {
      f->reset();
      spare.push_back(std::move(f));
    }
    return result;
  }

  Recording::Frame& frame() {
    if (!current) {
      if (spare.empty()) {
        current = std::make_shared<Recording::Frame>(device);
      } else {
        current = std::move(spare.back());
        spare.pop_back();
      }
    }
    return *current;
  }
};

VulkanDispatcher::VulkanDispatcher(std::shared_ptr<VulkanDevice> device, std::shared_ptr<PipelineCache> pipelines)
    : impl_(std::make_unique<Impl>()) {
  impl_->device = std::move(device);
  impl_->pipelines = std::move(pipelines);
  impl_->timestamps = impl_->device->timestampValidBits() > 0;
  impl_->uncaughtAtCreation = std::uncaught_exceptions();
}

VulkanDispatcher::~VulkanDispatcher() {
  // Unwinding from an error leaves work unsubmitted by design; that error is the one line to show.
  if (impl_->current && !impl_->current->pending.empty() && std::uncaught_exceptions() <= impl_->uncaughtAtCreation) {
    spdlog::warn("dispatcher destroyed with {} dispatches never submitted", impl_->current->pending.size());
  }
  // Frames wait for their own submissions as they go.
}

std::size_t VulkanDispatcher::pending() const { return impl_->current ? impl_->current->pending.size() : 0; }
std::uint64_t VulkanDispatcher::barriers() const { return impl_->barriers; }

void VulkanDispatcher::dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) {
  checkArguments(kernel, args);
  VulkanDevice& dev = *impl_->device;
  // Everything that can fail is checked before anything is recorded.
  const std::vector<Bound> bound = resolveBindings(kernel, args, dev, grid);
  const bool parameterized = impl_->current && impl_->current->parameterized;
  // A parameterized dispatch is recorded even with an empty grid: a replay may give it one.
  if (!parameterized && (grid.x == 0 || grid.y == 0 || grid.z == 0)) return;  // no work
  const KernelSource& built = parameterized ? impl_->parameterVariant(kernel) : kernel;
  const auto pipeline = impl_->pipelines->get(built);
  const auto push = packPushConstants(kernel, args);

  Recording::Frame& f = impl_->frame();
  f.begin();
  // A barrier only where this dispatch touches a buffer that an earlier one since the last barrier
  // wrote, or writes one that an earlier one read.
  bool hazard = false;
  for (const auto& b : bound) {
    auto it = f.touched.find(b.tensor->buffer->handle());
    if (it == f.touched.end()) continue;
    const bool writes = b.slot->access != Access::ReadOnly;
    if ((it->second & kWrite) || (writes && (it->second & kRead))) hazard = true;
  }
  if (hazard) barrier();
  for (const auto& b : bound) {
    f.touched[b.tensor->buffer->handle()] |= b.slot->access == Access::ReadOnly ? kRead : (kRead | kWrite);
  }

  Pending p{kernel.name, 0, pipeline, {}, kernel.hash, rangesOf(bound), {}};
  for (const auto& b : bound) p.buffers.push_back(b.tensor->buffer);
  std::vector<VkDescriptorBufferInfo> infos;
  for (const auto& r : p.ranges) infos.push_back({r.buffer, r.offset, r.range});
  std::vector<std::uint32_t> bindings;
  for (const auto& b : bound) bindings.push_back(b.slot->binding);
  if (parameterized) {
    p.parameters = f.allocateParameters(kernel.layout.pushBytes);
    writeParameters(p.parameters, grid, push);
    if (const BindingSlot* params = built.layout.findBinding(kParameterBinding)) {
      infos.push_back({p.parameters.buffer->handle(), p.parameters.push, (kernel.layout.pushBytes + 15) / 16 * 16});
      bindings.push_back(params->binding);
    }
  }
  const VkDescriptorSet set = f.allocateSet(pipeline->setLayout());
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = bindings[i];
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev.handle(), static_cast<std::uint32_t>(writes.size()), writes.data(), 0, nullptr);

  if (impl_->timestamps) {
    p.query = f.nextQueryPair();
    vkCmdWriteTimestamp(f.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, f.queryPools[p.query / kQueriesPerPool].get(),
                        p.query % kQueriesPerPool);
  }
  vkCmdBindPipeline(f.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->handle());
  vkCmdBindDescriptorSets(f.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout(), 0, 1, &set, 0, nullptr);
  if (parameterized) {
    vkCmdDispatchIndirect(f.cmd, p.parameters.buffer->handle(), p.parameters.grid);
  } else {
    if (!push.empty()) {
      vkCmdPushConstants(f.cmd, pipeline->layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         static_cast<std::uint32_t>(push.size()), push.data());
    }
    vkCmdDispatch(f.cmd, grid.x, grid.y, grid.z);
  }
  if (impl_->timestamps) {
    vkCmdWriteTimestamp(f.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.queryPools[p.query / kQueriesPerPool].get(),
                        p.query % kQueriesPerPool + 1);
  }
  f.pending.push_back(std::move(p));
}

void VulkanDispatcher::barrier() {
  if (!impl_->current || !impl_->current->recording) return;
  Recording::Frame& f = *impl_->current;
  memoryBarrier(f.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  ++impl_->barriers;
  f.touched.clear();
}

SubmitResult VulkanDispatcher::submit() {
  SubmitResult result = std::exchange(impl_->flushed, {});
  SubmitResult now = wait(submitAsync());
  // The flushed dispatches ran first: this submission's times continue after theirs.
  for (auto& d : now.dispatches) {
    d.startMicros += result.totalGpuMicros;
    d.endMicros += result.totalGpuMicros;
    result.dispatches.push_back(std::move(d));
  }
  result.totalGpuMicros += now.totalGpuMicros;
  return result;
}

void VulkanDispatcher::flush() { impl_->flushed = submit(); }

Submission VulkanDispatcher::submitAsync() {
  if (!impl_->current || !impl_->current->recording) return {};
  auto f = std::move(impl_->current);
  try {
    f->end();
    f->submitted = impl_->device->submit(f->cmd);
  } catch (...) {
    f->reset();
    impl_->spare.push_back(std::move(f));
    throw;
  }
  const std::uint64_t value = f->submitted;
  impl_->reclaim();
  impl_->reusable[value] = true;
  impl_->running.emplace(value, std::move(f));
  return {value, impl_->device->id()};
}

SubmitResult VulkanDispatcher::wait(Submission submission) {
  auto it = impl_->running.find(submission.value);
  if (it == impl_->running.end()) {
    // Waited for already, taken back as it finished, or another dispatcher's: waited for all the same.
    impl_->device->requireSubmitted(submission.value, submission.device);
    impl_->device->wait(submission.value);
    const auto done = impl_->finished.find(submission.value);
    if (done == impl_->finished.end()) return {};
    SubmitResult result = std::move(done->second);
    impl_->finished.erase(done);
    return result;
  }
  impl_->device->wait(submission.value);
  return impl_->retire(it);
}

void VulkanDispatcher::beginParameterized() {
  Recording::Frame& f = impl_->frame();
  if (!f.pending.empty()) {
    throw UserError("beginParameterized", fmt::format("{} dispatches are recorded and not submitted; submit or capture "
                                                      "them first", f.pending.size()));
  }
  f.parameterized = true;
}

std::shared_ptr<Recording> VulkanDispatcher::capture() {
  if (!impl_->current || !impl_->current->recording) {
    throw UserError("capture", "nothing was recorded since the last submit; record the dispatches to replay first");
  }
  auto f = std::move(impl_->current);
  f->end();
  return std::make_shared<Recording>(std::move(f));
}

Submission VulkanDispatcher::replay(Recording& recording) {
  auto& f = recording.frame_;
  if (f->device != impl_->device) {
    throw UserError("replay", "the recording was captured on another device's dispatcher");
  }
  // A command buffer cannot be pending twice: its previous run ends first (and its timings, if
  // nobody asked for them, are dropped).
  if (f->submitted) {
    for (auto it = impl_->running.begin(); it != impl_->running.end(); ++it) {
      if (it->second == f) {
        impl_->reusable.erase(it->first);
        impl_->running.erase(it);
        break;
      }
    }
    impl_->device->wait(f->submitted);
  }
  f->submitted = impl_->device->submit(f->cmd);
  ++recording.replays_;
  impl_->reclaim();
  impl_->reusable[f->submitted] = false;
  impl_->running.emplace(f->submitted, f);
  return {f->submitted, impl_->device->id()};
}

RecordingUpdate::RecordingUpdate(VulkanDispatcher& dispatcher, std::shared_ptr<Recording> recording)
    : dispatcher_(dispatcher), recording_(std::move(recording)) {
  const Recording::Frame& f = *recording_->frame_;
  if (!f.parameterized) {
    throw UserError("RecordingUpdate", "the recording was not made after beginParameterized(); its push constants and "
                                       "grids are part of the command buffer");
  }
  if (f.device != dispatcher_.impl_->device) {
    throw UserError("RecordingUpdate", "the recording was captured on another device's dispatcher");
  }
  f.device->wait(f.submitted);
}

void RecordingUpdate::dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) {
  checkArguments(kernel, args);
  const Recording::Frame& f = *recording_->frame_;
  const std::vector<Bound> bound = resolveBindings(kernel, args, *f.device, grid);
  if (!mismatch_.empty()) return;
  if (next_ >= f.pending.size()) {
    mismatch_ = fmt::format("dispatch {} ({}): the recording holds {}", next_ + 1, kernel.name, f.pending.size());
    return;
  }
  const Pending& p = f.pending[next_];
  if (p.hash != kernel.hash) {
    mismatch_ = fmt::format("dispatch {}: kernel {} where the recording has {}", next_ + 1, kernel.name, p.kernel);
  } else if (rangesOf(bound) != p.ranges) {
    std::vector<std::string> differ;
    const auto ranges = rangesOf(bound);
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i] != p.ranges[i]) differ.push_back(bound[i].slot->name);
    }
    mismatch_ = fmt::format("dispatch {} ({}): other buffer ranges bound as {}", next_ + 1, kernel.name,
                            fmt::join(differ, ", "));
  } else {
    writeParameters(p.parameters, grid, packPushConstants(kernel, args));
    ++next_;
  }
}

bool RecordingUpdate::matches() const { return mismatch_.empty() && next_ == recording_->frame_->pending.size(); }

std::string RecordingUpdate::mismatch() const {
  if (!mismatch_.empty()) return mismatch_;
  if (next_ != recording_->frame_->pending.size()) {
    return fmt::format("{} dispatches where the recording holds {}", next_, recording_->frame_->pending.size());
  }
  return "";
}

Submission RecordingUpdate::submitAsync() {
  if (!matches()) {
    throw UserError("RecordingUpdate", fmt::format("replaying a recording given other dispatches: {}; check matches() "
                                                   "and record afresh where it is false", mismatch()));
  }
  return dispatcher_.replay(*recording_);
}

SubmitResult RecordingUpdate::submit() { return wait(submitAsync()); }

SubmitResult RecordingUpdate::wait(Submission submission) { return dispatcher_.wait(submission); }

void RecordingUpdate::flush() {
  throw UnsupportedError("a replayed recording runs whole: nothing can be submitted part-way through it (the online "
                         "compare, FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE, needs direct recording)");
}

}  // namespace foundry
