#pragma once
// GLSL -> SPIR-V with shaderc at run time. Errors quote the numbered lines around the failure and name
// the snippet or stage they came from.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "foundry/KernelSource.h"

namespace foundry {

class ShaderCompiler {
 public:
  enum class Optimization { None, Performance };
  explicit ShaderCompiler(Optimization optimization = Optimization::Performance);

  /// Compiles `source`; throws DeviceError with a quoted, attributed message on failure.
  std::vector<std::uint32_t> compile(const KernelSource& source) const;

  /// Why SPIR-V that did not come from compile() (a cache entry) must not reach a driver, or "" when
  /// spirv-val accepts it for the Vulkan version compile() targets. Drivers trust what they are given.
  std::string rejects(const std::vector<std::uint32_t>& spirv) const;

  /// Identifies the compiler and its options; part of every cache key.
  const std::string& identity() const { return identity_; }
  /// How many times compile() ran shaderc (cache tests count this).
  std::uint64_t compileCount() const { return count_.load(); }

 private:
  Optimization optimization_;
  std::string identity_;
  mutable std::atomic<std::uint64_t> count_{0};
};

/// Turns shaderc's message into one that quotes numbered lines of the block each error points at.
std::string describeCompileError(const KernelSource& source, const std::string& compilerMessage);

}  // namespace foundry
