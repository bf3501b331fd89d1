#pragma once
// Records kernel dispatches and runs them. An interface, so GMock tests can assert exactly which
// kernels, grids and push constants a Step records; VulkanDispatcher is the real one.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "foundry/KernelSource.h"
#include "foundry/Tensor.h"

namespace foundry {

struct Grid {
  std::uint32_t x = 1, y = 1, z = 1;
  bool operator==(const Grid&) const = default;
};

using PushValue = std::variant<std::uint32_t, std::int32_t, float, std::array<std::uint32_t, 2>,
                               std::array<float, 2>, std::array<std::uint32_t, 4>, std::array<float, 4>>;

/// Tensors bound by buffer name and push constants set by field name, checked against a kernel's
/// layout before any dispatch.
class Arguments {
 public:
  Arguments& bind(const std::string& name, const Tensor& tensor);
  Arguments& set(const std::string& name, std::uint32_t value) { return setValue(name, value); }
  Arguments& set(const std::string& name, std::int32_t value) { return setValue(name, value); }
  Arguments& set(const std::string& name, float value) { return setValue(name, value); }
  Arguments& setValue(const std::string& name, PushValue value);

  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, PushValue>& push() const { return push_; }
  /// The push-constant value of `name` as a uint32 (tests read these back).
  std::uint32_t pushU32(const std::string& name) const;

 private:
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, PushValue> push_;
};

/// Checks every binding and push field of `kernel` against `args`: nothing missing, nothing extra,
/// dtypes and types matching. Throws UserError naming the kernel and the field.
void checkArguments(const KernelSource& kernel, const Arguments& args);
/// Packs the push constants into the kernel's std430 block.
std::vector<std::byte> packPushConstants(const KernelSource& kernel, const Arguments& args);

struct DispatchTiming {
  std::string kernel;
  double gpuMicros = 0;  ///< from GPU timestamps; 0 where the queue has none
  double startMicros = 0, endMicros = 0;  ///< relative to the first dispatch of the submission
};

struct SubmitResult {
  std::vector<DispatchTiming> dispatches;
  double totalGpuMicros = 0;  ///< first start to last end
};

/// Work submitted and perhaps still running: done when the device's timeline semaphore reaches
/// `value` (vk/External.h gives the semaphore, for an application's own submissions to wait on).
/// Value 0 is work that was already done when it was returned. `device` names the device whose
/// timeline `value` counts on (VulkanDevice::id; 0 where no device made it: a double's), so a wait on
/// another Runtime's submission is refused instead of reading a value of the wrong timeline.
struct Submission {
  std::uint64_t value = 0;
  std::uint64_t device = 0;
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  /// Records one dispatch. Arguments are checked first; nothing is recorded if they are wrong.
  virtual void dispatch(const KernelSource& kernel, const Arguments& args, Grid grid) = 0;
  /// Runs everything recorded since the last submit and waits for it.
  virtual SubmitResult submit() = 0;
  /// Submits everything recorded since the last submit and returns without waiting; the host can
  /// record or compute meanwhile. This default runs submit() at once (for doubles that record only).
  virtual Submission submitAsync();
  /// Waits for `submission` and returns its timings (each submission's once; later calls: empty).
  /// Another dispatcher's submission on the same device is waited for too, without timings.
  virtual SubmitResult wait(Submission submission);
  /// Runs everything recorded so far and waits, like submit(), for a step that must read a result
  /// before it records more (the online compare); the next submit() still reports those dispatches.
  virtual void flush() { submit(); }
  /// Orders everything recorded so far before anything recorded next, whether or not they share
  /// buffers (benchmarks use it to keep independent calls from overlapping).
  virtual void barrier() {}

 private:
  std::map<std::uint64_t, SubmitResult> done_;  ///< the default submitAsync()'s results
  std::uint64_t next_ = 0;
};

}  // namespace foundry
