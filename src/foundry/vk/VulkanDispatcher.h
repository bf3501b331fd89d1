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
  /// Whether its push constants and grids are read from its parameter block (RecordingUpdate).
  bool parameterized() const;
  /// Times it was submitted.
  std::uint64_t replays() const { return replays_; }

 private:
  friend class VulkanDispatcher;
  friend class RecordingUpdate;
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

  /// Dispatches recorded from now until the next capture() or submit read their push constants and
  /// grids from a host-visible parameter block (parameterBlockVariant kernels, vkCmdDispatchIndirect),
  /// so a RecordingUpdate can give a captured Recording new values. Nothing may be pending.
  void beginParameterized();
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
  friend class RecordingUpdate;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// New push constants and grids for a parameterized Recording, given the way they were first given:
/// each dispatch() is checked like VulkanDispatcher's, compared with the dispatch captured at its
/// position (the same kernel, the same buffer ranges) and its values written into the recording's
/// parameter block; nothing is recorded. submitAsync() replays the recording. Where a dispatch
/// differs (another kernel, another token view, a Split-K plan with other scratch), matches() turns
/// false and nothing more is written; the caller records afresh. Made after the recording's last
/// run has finished (it waits), so the parameter block is not written while the device reads it.
class RecordingUpdate : public Dispatcher {
 public:
  RecordingUpdate(VulkanDispatcher& dispatcher, std::shared_ptr<Recording> recording);

  void dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) override;
  /// Replays and waits; UserError where matches() is false.
  SubmitResult submit() override;
  /// Replays without waiting; UserError where matches() is false.
  Submission submitAsync() override;
  SubmitResult wait(Submission submission) override;
  /// Replaying part of a recording is not possible: UnsupportedError.
  void flush() override;

  /// Every dispatch so far equal to the captured one, and as many as were captured.
  bool matches() const;
  /// Why matches() is false ("" where it is true).
  std::string mismatch() const;

 private:
  VulkanDispatcher& dispatcher_;
  std::shared_ptr<Recording> recording_;
  std::size_t next_ = 0;
  std::string mismatch_;
};

}  // namespace foundry
