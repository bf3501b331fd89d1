#pragma once
// Ownership of the Vulkan handles Foundry creates. An Owned handle is destroyed exactly once, by the
// function it was created with, when its owner goes; it moves and never copies. Handles Foundry is
// given by an application (docs/embedding.md) are never wrapped: they stay raw and are never destroyed.
#include <utility>

#include <vulkan/vulkan.h>

#include "foundry/vk/Check.h"

namespace foundry {

/// `Handle` created from `Parent` (a VkDevice or VkInstance), destroyed with
/// `destroy(parent, handle, nullptr)`.
template <typename Parent, typename Handle>
class Owned {
 public:
  using Destroy = void (*)(Parent, Handle, const VkAllocationCallbacks*);

  Owned() = default;
  Owned(Parent parent, Handle handle, Destroy destroy) : parent_(parent), handle_(handle), destroy_(destroy) {}
  ~Owned() { reset(); }
  Owned(Owned&& other) noexcept { *this = std::move(other); }
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      parent_ = other.parent_;
      handle_ = std::exchange(other.handle_, Handle{});
      destroy_ = other.destroy_;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != Handle{}; }
  /// Destroys the handle now (a no-op when empty).
  void reset() {
    if (handle_ != Handle{}) destroy_(parent_, std::exchange(handle_, Handle{}), nullptr);
  }

 private:
  Parent parent_{};
  Handle handle_{};
  Destroy destroy_ = nullptr;
};

/// Creates a child of `device` with `create(device, &info, nullptr, &handle)` and owns it at once, so
/// a later failure in the same constructor cannot leak it. Throws DeviceError naming `call` on failure.
template <typename Handle, typename Info, typename Create>
Owned<VkDevice, Handle> createOwned(VkDevice device, Create create, const Info& info,
                                    typename Owned<VkDevice, Handle>::Destroy destroy, const char* call) {
  Handle handle{};
  const VkResult r = create(device, &info, nullptr, &handle);
  if (r != VK_SUCCESS) throwVkError(r, call, __FILE__, __LINE__);
  return Owned<VkDevice, Handle>(device, handle, destroy);
}

}  // namespace foundry
