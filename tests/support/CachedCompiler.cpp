#include "support/CachedCompiler.h"

#include "foundry/DiskCache.h"
#include "foundry/KernelCache.h"
#include "foundry/steps/Options.h"

namespace foundry::test {

CachedCompiler::CachedCompiler(ShaderCompiler::Optimization optimization) {
  // Only the directory the environment names: a suite run by hand writes nothing to ~/.cache.
  const std::string dir = Options::fromEnvironment().runtime.cacheDir;
  cache_ = std::make_shared<KernelCache>(std::make_shared<ShaderCompiler>(optimization),
                                         dir.empty() ? nullptr : std::make_shared<DiskCache>(dir));
}

std::vector<std::uint32_t> CachedCompiler::compile(const KernelSource& source) const { return *cache_->spirv(source); }

}  // namespace foundry::test
