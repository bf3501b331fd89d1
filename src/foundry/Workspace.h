#pragma once
// Where steps get scratch tensors (Split-K partials, materialised scores). An interface so GMock
// tests can plan without a device; DeviceWorkspace keeps device buffers and reuses them by name.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "foundry/Tensor.h"

namespace foundry {

class Runtime;

class Workspace {
 public:
  virtual ~Workspace() = default;
  /// A scratch tensor; its contents are undefined. Reuse across dispatches is safe because the
  /// dispatcher orders conflicting accesses.
  virtual Tensor scratch(const std::string& name, DType dtype, std::vector<std::int64_t> dims) = 0;
  /// Scratch that holds zeros when first handed out (Split-K arrival counters); whoever uses it must
  /// leave it zero again, so later calls may rely on it.
  virtual Tensor zeroed(const std::string& name, DType dtype, std::vector<std::int64_t> dims) = 0;
  /// Bytes of scratch held.
  virtual std::uint64_t bytes() const = 0;
};

/// Scratch on a device; a name's buffer is kept and grown as needed.
class DeviceWorkspace : public Workspace {
 public:
  explicit DeviceWorkspace(Runtime& runtime) : runtime_(runtime) {}
  Tensor scratch(const std::string& name, DType dtype, std::vector<std::int64_t> dims) override;
  Tensor zeroed(const std::string& name, DType dtype, std::vector<std::int64_t> dims) override;
  std::uint64_t bytes() const override;

 private:
  Tensor take(const std::string& name, DType dtype, std::vector<std::int64_t> dims, bool zero);
  Runtime& runtime_;
  std::map<std::string, Tensor> held_;
};

/// Shape-only scratch for planning and tests: records every request, allocates nothing.
class ShapeWorkspace : public Workspace {
 public:
  Tensor scratch(const std::string& name, DType dtype, std::vector<std::int64_t> dims) override;
  Tensor zeroed(const std::string& name, DType dtype, std::vector<std::int64_t> dims) override {
    return scratch(name, dtype, std::move(dims));
  }
  std::uint64_t bytes() const override { return bytes_; }
  const std::vector<Tensor>& requests() const { return requests_; }

 private:
  std::vector<Tensor> requests_;
  std::uint64_t bytes_ = 0;
};

}  // namespace foundry
