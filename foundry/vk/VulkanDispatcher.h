#pragma once
// The Vulkan Dispatcher: records dispatches into a command buffer with the memory barriers their
// buffer hazards need (read-after-write, write-after-write, write-after-read), GPU timestamps around
// each, and submits them together: waiting (submit) or not (submitAsync, then wait). What was recorded
// can also be kept as a Recording and submitted again and again without recording anything (replay).
// This header does not include Vulkan, so Runtime::dispatcher() compiles without it. One dispatcher
// is used by one thread at a time (docs/threading.md).
#include <cstdint>
#include <memory>

#include "foundry/Dispatcher.h"

namespace foundry {

class PipelineCache;
class VulkanDevice;

/// Dispatches recorded once into a command buffer that VulkanDispatcher::replay submits again, with
/// the same kernels, grids, push constants and buffers each time (like a CUDA graph). It keeps those
/// kernels and buffers alive.
class Recording {
 public:
  struct Frame;
  explicit Recording(std::shared_ptr<Frame> frame);
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  /// Dispatches it holds.
  std::size_t dispatches() const;
  /// Times it was submitted.
  std::uint64_t replays() const { return replays_; }

 private:
  friend class VulkanDispatcher;
  std::shared_ptr<Frame> frame_;
  std::uint64_t replays_ = 0;
};

class VulkanDispatcher : public Dispatcher {
 public:
  VulkanDispatcher(std::shared_ptr<VulkanDevice> device, std::shared_ptr<PipelineCache> pipelines);
  ~VulkanDispatcher() override;  ///< waits for this dispatcher's work still running
  VulkanDispatcher(const VulkanDispatcher&) = delete;
  VulkanDispatcher& operator=(const VulkanDispatcher&) = delete;

  void dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) override;
  SubmitResult submit() override;
  Submission submitAsync() override;
  SubmitResult wait(Submission submission) override;
  void flush() override;
  void barrier() override;

  /// Ends what was recorded since the last submit as a Recording; nothing runs yet.
  std::shared_ptr<Recording> capture();
  /// Submits `recording` once more and returns at once; wait() on the result gives its timings.
  /// A recording still running from its previous replay is waited for first (a command buffer
  /// cannot run twice at once).
  Submission replay(Recording& recording);

  /// Dispatches recorded and not yet submitted.
  std::size_t pending() const;
  /// Barriers recorded since construction (tests check that independent dispatches get none).
  std::uint64_t barriers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace foundry
