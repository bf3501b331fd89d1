#pragma once
// A directory of checksummed blobs keyed by hash. Safe for concurrent processes (atomic renames);
// a truncated or corrupted entry is detected, removed and reported as a miss. An entry that is not a
// file (a FIFO, a directory) is never opened in a way that blocks: it is removed, or skipped where it
// cannot be, with one warning, and costs that entry only. A directory that cannot be used turns the
// cache off with one warning; work continues uncached.
#include <atomic>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace foundry {

class DiskCache {
 public:
  /// `directory` empty or "off": a disabled cache.
  explicit DiskCache(std::filesystem::path directory);

  bool enabled() const { return enabled_.load(); }
  const std::filesystem::path& directory() const { return dir_; }

  /// The entry `key` in `bucket` ("spirv", "pipeline"), verified; nullopt on miss or corruption.
  std::optional<std::vector<std::byte>> load(const std::string& bucket, const std::string& key) const;
  /// Stores atomically. Failure to write disables the cache with a warning.
  void store(const std::string& bucket, const std::string& key, std::span<const std::byte> payload) const;
  std::filesystem::path pathFor(const std::string& bucket, const std::string& key) const;
  /// Removes an entry that load() returned but its user cannot use, with one warning naming the entry
  /// and `why` ("holds SPIR-V that ..."); the caller rebuilds it. Counts as corrupt.
  void evict(const std::string& bucket, const std::string& key, const std::string& why) const;
  /// Removes an entry quietly (what evict() does after its warning).
  void erase(const std::string& bucket, const std::string& key) const;

  std::uint64_t hits() const { return hits_.load(); }
  std::uint64_t misses() const { return misses_.load(); }
  std::uint64_t corrupt() const { return corrupt_.load(); }

  /// $XDG_CACHE_HOME/foundry, else $HOME/.cache/foundry, else a directory under /tmp.
  static std::filesystem::path defaultDirectory(const std::string& xdgCacheHome, const std::string& home);

 private:
  void disable(const std::string& why) const;
  void setAside(const std::filesystem::path& path, const std::string& what) const;

  std::filesystem::path dir_;
  mutable std::atomic<bool> enabled_{false}, warned_{false};
  mutable std::atomic<std::uint64_t> hits_{0}, misses_{0}, corrupt_{0};
};

}  // namespace foundry
