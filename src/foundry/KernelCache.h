#pragma once
// SPIR-V for a KernelSource: from memory, else from the disk cache, else from shaderc. Keyed by a hash
// of the GLSL text and the compiler's identity, so a change to either recompiles. SPIR-V read from
// disk is validated before anyone hands it to a driver; an entry that fails is evicted and rebuilt.
// Thread-safe: a kernel that several threads miss at once is loaded or compiled once, by the first;
// the others wait for its result (docs/threading.md).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "foundry/DiskCache.h"
#include "foundry/KernelSource.h"
#include "foundry/ShaderCompiler.h"

namespace foundry {

using Spirv = std::vector<std::uint32_t>;

class KernelCache {
 public:
  /// `dumpDirectory` non-empty: write each kernel's .comp and .json there the first time it is seen.
  KernelCache(std::shared_ptr<const ShaderCompiler> compiler, std::shared_ptr<const DiskCache> disk,
              std::string dumpDirectory = {});

  std::shared_ptr<const Spirv> spirv(const KernelSource& source);
  /// True when spirv(source) was served from the disk cache rather than compiled by this process.
  bool fromDisk(const KernelSource& source);
  /// Compiles `source` again, replacing its entry in memory and on disk: for SPIR-V that came from
  /// disk and that a driver then refused.
  std::shared_ptr<const Spirv> rebuild(const KernelSource& source);
  std::string keyFor(const KernelSource& source) const;

  std::uint64_t memoryHits() const { return memoryHits_.load(); }
  std::uint64_t diskHits() const { return diskHits_.load(); }
  std::uint64_t compiles() const { return compiles_.load(); }
  const ShaderCompiler& compiler() const { return *compiler_; }
  /// The disk cache behind this one (may be null).
  const DiskCache* disk() const { return disk_.get(); }

 private:
  std::shared_ptr<const Spirv> loadFromDisk(const std::string& key, bool coopMat2);
  std::shared_ptr<const Spirv> compileAndStore(const KernelSource& source, const std::string& key);
  /// Loads or compiles `key` (outside the lock); returns the code and whether it came from disk.
  std::pair<std::shared_ptr<const Spirv>, bool> produce(const KernelSource& source, const std::string& key);

  std::shared_ptr<const ShaderCompiler> compiler_;
  std::shared_ptr<const DiskCache> disk_;
  std::string dumpDirectory_;
  std::mutex mutex_;
  std::condition_variable produced_;  ///< signalled when a key another thread was producing is done
  std::set<std::string> producing_;   ///< keys some thread is loading or compiling now
  std::map<std::string, std::shared_ptr<const Spirv>> memory_;
  std::set<std::string> fromDisk_;  ///< keys of memory_ whose SPIR-V was read from disk
  std::atomic<std::uint64_t> memoryHits_{0}, diskHits_{0}, compiles_{0};
};

/// Writes `<dir>/<kernel>.comp` and `<dir>/<kernel>.json` (key, stages, layout, notes).
void dumpKernel(const std::string& directory, const KernelSource& source);

}  // namespace foundry
