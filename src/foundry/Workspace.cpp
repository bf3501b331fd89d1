#include "foundry/Workspace.h"

#include "foundry/Runtime.h"
#include "foundry/vk/Buffer.h"

namespace foundry {

Tensor DeviceWorkspace::scratch(const std::string& name, DType dtype, std::vector<std::int64_t> dims) {
  return take(name, dtype, std::move(dims), false);
}

Tensor DeviceWorkspace::zeroed(const std::string& name, DType dtype, std::vector<std::int64_t> dims) {
  return take(name, dtype, std::move(dims), true);
}

Tensor DeviceWorkspace::take(const std::string& name, DType dtype, std::vector<std::int64_t> dims, bool zero) {
  Tensor want = Tensor::describe(name, dtype, std::move(dims));
  auto it = held_.find(name);
  if (it == held_.end() || it->second.buffer->size() < want.spanBytes()) {
    if (it != held_.end()) held_.erase(it);  // free the old buffer before taking a larger one
    it = held_.emplace(name, runtime_.allocate(want)).first;
    if (zero) it->second.buffer->fill(0u);
  }
  want.buffer = it->second.buffer;
  return want;
}

std::uint64_t DeviceWorkspace::bytes() const {
  std::uint64_t n = 0;
  for (const auto& [_, t] : held_) n += t.buffer->size();
  return n;
}

Tensor ShapeWorkspace::scratch(const std::string& name, DType dtype, std::vector<std::int64_t> dims) {
  Tensor t = Tensor::describe(name, dtype, std::move(dims));
  bytes_ += t.spanBytes();
  requests_.push_back(t);
  return t;
}

}  // namespace foundry
