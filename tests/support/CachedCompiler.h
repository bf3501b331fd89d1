#pragma once
// Shaderc for the compile-only tests, through the kernel disk cache the suites share
// (FOUNDRY_CACHE_DIR, which ctest sets for every entry). A kernel's SPIR-V is a function of its GLSL
// text and of the compiler's identity (versions, optimisation level), and the cache's key holds both:
// a text that any suite of the same CI run compiled already (another device preset emitting the same
// kernel, another compile test, the release build's run before the sanitizer build's) is read back and
// checked by spirv-val rather than compiled again, and what the test claims, that the text compiles
// with this shaderc, holds as before. Without FOUNDRY_CACHE_DIR (a suite run by hand), or with "off",
// every kernel is compiled.
#include <cstdint>
#include <memory>
#include <vector>

#include "foundry/KernelSource.h"
#include "foundry/ShaderCompiler.h"

namespace foundry {
class KernelCache;
}

namespace foundry::test {

class CachedCompiler {
 public:
  explicit CachedCompiler(ShaderCompiler::Optimization optimization);
  /// The kernel's SPIR-V; a kernel that does not compile throws what ShaderCompiler::compile throws.
  std::vector<std::uint32_t> compile(const KernelSource& source) const;

 private:
  std::shared_ptr<KernelCache> cache_;
};

}  // namespace foundry::test
