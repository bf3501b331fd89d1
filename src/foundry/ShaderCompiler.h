#pragma once
// GLSL -> SPIR-V with shaderc at run time. Errors quote the numbered lines around the failure and name
// the snippet or stage they came from. Kernels on GL_NV_cooperative_matrix2, which Debian 12's shaderc
// cannot compile, go to an external glslc where one is given (FOUNDRY_GLSLC).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "foundry/ExternalGlslc.h"
#include "foundry/KernelSource.h"

namespace foundry {

class ShaderCompiler {
 public:
  enum class Optimization { None, Performance };
  /// `externalGlslc`: the glslc for cooperative-matrix-2 kernels (FOUNDRY_GLSLC), or "" for none.
  explicit ShaderCompiler(Optimization optimization = Optimization::Performance, const std::string& externalGlslc = "");

  /// Compiles `source`; throws DeviceError with a quoted, attributed message on failure, and
  /// UnsupportedError for a cooperative-matrix-2 kernel without a glslc that compiles it.
  std::vector<std::uint32_t> compile(const KernelSource& source) const;

  /// Why SPIR-V that did not come from compile() (a cache entry) must not reach a driver, or "" when
  /// spirv-val accepts it for the Vulkan version compile() targets. Drivers trust what they are given.
  /// A cooperative-matrix-2 module is checked by the spirv-val beside the external glslc.
  std::string rejects(const std::vector<std::uint32_t>& spirv, bool coopMat2 = false) const;

  /// Identifies the compiler and its options; part of every cache key.
  const std::string& identity() const { return identity_; }
  /// The compiler that compiles `source`, with its options: its cache key's part.
  const std::string& identity(const KernelSource& source) const {
    return source.usesCoopMat2 ? coopMat2Identity_ : identity_;
  }
  /// Kernels on GL_NV_cooperative_matrix2 compile here (an external glslc that can was given).
  bool coopMat2() const { return external_ && external_->coopMat2(); }
  /// ... and with bf16 operands (GL_EXT_bfloat16).
  bool coopMat2Bf16() const { return coopMat2() && external_->bf16(); }
  /// The external glslc, or null.
  const ExternalGlslc* external() const { return external_.get(); }
  /// How many times compile() ran shaderc (cache tests count this).
  std::uint64_t compileCount() const { return count_.load(); }

 private:
  Optimization optimization_;
  std::string identity_, coopMat2Identity_;
  std::shared_ptr<const ExternalGlslc> external_;
  mutable std::atomic<std::uint64_t> count_{0};
};

/// Turns shaderc's message into one that quotes numbered lines of the block each error points at.
std::string describeCompileError(const KernelSource& source, const std::string& compilerMessage);
/// Throws describeCompileError's message: a UserError (its field the file) where the first error lies
/// in a user's own GLSL (SourceBlock::user), else a DeviceError.
[[noreturn]] void throwCompileError(const KernelSource& source, const std::string& compilerMessage);

}  // namespace foundry
