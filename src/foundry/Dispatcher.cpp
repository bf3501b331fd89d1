#include "foundry/Dispatcher.h"

#include <cstring>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

namespace {

PushType typeOf(const PushValue& v) {
  switch (v.index()) {
    case 0: return PushType::U32;
    case 1: return PushType::I32;
    case 2: return PushType::F32;
    case 3: return PushType::UVec2;
    case 4: return PushType::Vec2;
    case 5: return PushType::UVec4;
    default: return PushType::Vec4;
  }
}

}  // namespace

Arguments& Arguments::bind(const std::string& name, const Tensor& tensor) {
  tensors_[name] = tensor;
  return *this;
}

Arguments& Arguments::setValue(const std::string& name, PushValue value) {
  push_[name] = value;
  return *this;
}

std::uint32_t Arguments::pushU32(const std::string& name) const {
  auto it = push_.find(name);
  if (it == push_.end()) throw InternalError(fmt::format("push constant '{}' was not set", name));
  if (const auto* u = std::get_if<std::uint32_t>(&it->second)) return *u;
  if (const auto* i = std::get_if<std::int32_t>(&it->second)) return static_cast<std::uint32_t>(*i);
  throw InternalError(fmt::format("push constant '{}' is not an integer", name));
}

void checkArguments(const KernelSource& kernel, const Arguments& args) {
  const std::string field = fmt::format("kernel {}", kernel.name);
  for (const auto& b : kernel.layout.bindings) {
    auto it = args.tensors().find(b.name);
    if (it == args.tensors().end()) {
      throw UserError(field, fmt::format("buffer '{}' ({} {}) is not bound", b.name, dtypeName(b.dtype),
                                         accessName(b.access)));
    }
    if (it->second.dtype != b.dtype) {
      throw UserError(field, fmt::format("buffer '{}' expects {} but tensor '{}' is {}", b.name, dtypeName(b.dtype),
                                         it->second.name, dtypeName(it->second.dtype)));
    }
  }
  for (const auto& [name, tensor] : args.tensors()) {
    if (!kernel.layout.findBinding(name)) {
      throw UserError(field, fmt::format("tensor '{}' is bound as '{}', which the kernel does not declare", tensor.name,
                                         name));
    }
  }
  for (const auto& p : kernel.layout.push) {
    auto it = args.push().find(p.name);
    if (it == args.push().end()) {
      throw UserError(field, fmt::format("push constant '{}' ({}) is not set", p.name, pushTypeGlsl(p.type)));
    }
    if (typeOf(it->second) != p.type) {
      throw UserError(field, fmt::format("push constant '{}' is {} but was set as {}", p.name, pushTypeGlsl(p.type),
                                         pushTypeGlsl(typeOf(it->second))));
    }
  }
  for (const auto& [name, value] : args.push()) {
    if (!kernel.layout.findPush(name)) {
      throw UserError(field, fmt::format("push constant '{}' is set but the kernel does not declare it", name));
    }
  }
}

Submission Dispatcher::submitAsync() {
  // Values of this default never meet a device's timeline: they index done_.
  const std::uint64_t value = ++next_;
  done_[value] = submit();
  return {value};
}

SubmitResult Dispatcher::wait(Submission submission) {
  auto it = done_.find(submission.value);
  if (it == done_.end()) return {};
  SubmitResult r = std::move(it->second);
  done_.erase(it);
  return r;
}

std::vector<std::byte> packPushConstants(const KernelSource& kernel, const Arguments& args) {
  std::vector<std::byte> out(kernel.layout.pushBytes);
  for (const auto& p : kernel.layout.push) {
    const PushValue& v = args.push().at(p.name);
    std::visit([&](const auto& x) { std::memcpy(out.data() + p.offset, &x, sizeof(x)); }, v);
  }
  return out;
}

}  // namespace foundry
