#pragma once
// A Stage contributes one piece of a compound kernel. It holds only its parameters, declares what it
// needs and provides through a KernelInterface, and emits its part of main().
#include <memory>
#include <string>

#include "foundry/GlslWriter.h"
#include "foundry/KernelInterface.h"

namespace foundry {

struct DeviceInfo;

class Stage {
 public:
  virtual ~Stage() = default;
  /// The stage's type name, e.g. "FlashDecodeStage"; used in banners, errors and kernel names.
  virtual std::string name() const = 0;
  /// Declares buffers, push constants, shared arrays, constants, symbols, snippets and extensions.
  virtual void declare(KernelInterface& iface, const DeviceInfo& device) const = 0;
  /// Emits this stage's part of main(). Symbols it produces are declared at main() scope.
  virtual void emit(GlslWriter& out, const DeviceInfo& device) const = 0;
  /// Every parameter that changes the emitted code, e.g. "D128_sg4_k8". The attention steps also hash
  /// a modifier's own GLSL (its GlslSource snippets and emit()) into their kernel maps, so a modifier
  /// whose code is a value need not spell it here.
  virtual std::string key() const = 0;
};

using StagePtr = std::shared_ptr<const Stage>;

/// A stage whose code depends only on one element type, its key (fills, copies).
class ElementStage : public Stage {
 public:
  explicit ElementStage(DType dtype) : dtype_(dtype) {}
  std::string key() const override { return std::string(dtypeName(dtype_)); }

 protected:
  DType dtype_;
};

}  // namespace foundry
