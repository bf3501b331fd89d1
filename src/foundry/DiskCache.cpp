#include "foundry/DiskCache.h"

#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/Hash.h"

namespace foundry {

namespace {
constexpr char kMagic[8] = {'F', 'D', 'R', 'Y', 'C', 'A', 'C', '1'};
// Header: magic, key (32 hex), payload checksum (32 hex), payload size (16 hex).
constexpr std::size_t kHeaderBytes = 8 + 32 + 32 + 16;
}  // namespace

DiskCache::DiskCache(std::filesystem::path directory) : dir_(std::move(directory)) {
  if (dir_.empty() || dir_ == "off") return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_)) {
    disable(fmt::format("cannot create {}: {}", dir_.string(), ec ? ec.message() : "not a directory"));
    return;
  }
  enabled_ = true;
}

void DiskCache::disable(const std::string& why) const {
  enabled_ = false;
  if (!warned_.exchange(true)) spdlog::warn("kernel cache disabled, continuing uncached: {}", why);
}

std::filesystem::path DiskCache::defaultDirectory(const std::string& xdgCacheHome, const std::string& home) {
  if (!xdgCacheHome.empty()) return std::filesystem::path(xdgCacheHome) / "foundry";
  if (!home.empty()) return std::filesystem::path(home) / ".cache" / "foundry";
  return std::filesystem::temp_directory_path() / "foundry-cache";
}

std::filesystem::path DiskCache::pathFor(const std::string& bucket, const std::string& key) const {
  return dir_ / bucket / (key + ".bin");
}

void DiskCache::evict(const std::string& bucket, const std::string& key, const std::string& why) const {
  ++corrupt_;
  const auto path = pathFor(bucket, key);
  spdlog::warn("cache entry {} {}; rebuilding it", path.string(), why);
  erase(bucket, key);
}

void DiskCache::erase(const std::string& bucket, const std::string& key) const {
  std::error_code ec;
  std::filesystem::remove(pathFor(bucket, key), ec);
}

void DiskCache::setAside(const std::filesystem::path& path, const std::string& what) const {
  ++corrupt_;
  std::error_code ec;
  if (std::filesystem::remove(path, ec)) {
    spdlog::warn("cache entry {} is {}, not a file; removed it and rebuilding it", path.string(), what);
  } else {
    spdlog::warn("cache entry {} is {}, not a file, and cannot be removed ({}); building without it", path.string(),
                 what, ec ? ec.message() : "it is still there");
  }
}

std::optional<std::vector<std::byte>> DiskCache::load(const std::string& bucket, const std::string& key) const {
  if (!enabled()) return std::nullopt;
  const auto path = pathFor(bucket, key);
  auto bytes = readWholeFile(path);
  if (!bytes) {
    ++misses_;
    if (const auto what = nonRegularFile(path)) setAside(path, *what);
    return std::nullopt;
  }
  auto reject = [&](const char* why) -> std::optional<std::vector<std::byte>> {
    ++misses_;
    evict(bucket, key, fmt::format("is {}", why));
    return std::nullopt;
  };
  if (bytes->size() < kHeaderBytes) return reject("truncated");
  const char* h = reinterpret_cast<const char*>(bytes->data());
  if (std::memcmp(h, kMagic, 8) != 0) return reject("not a cache file");
  if (std::string_view(h + 8, 32) != key) return reject("for another key");
  std::uint64_t size = 0;
  try {
    size = std::stoull(std::string(h + 72, 16), nullptr, 16);
  } catch (const std::exception&) {
    return reject("unreadable");
  }
  if (size != bytes->size() - kHeaderBytes) return reject("truncated");
  std::vector<std::byte> payload(bytes->begin() + kHeaderBytes, bytes->end());
  if (Hasher().add(payload).hex() != std::string_view(h + 40, 32)) return reject("corrupted (checksum mismatch)");
  ++hits_;
  return payload;
}

void DiskCache::store(const std::string& bucket, const std::string& key, std::span<const std::byte> payload) const {
  if (!enabled()) return;
  FOUNDRY_CHECK_INTERNAL(key.size() == 32, "cache keys are 32 hex digits, got '{}'", key);
  std::string header(kMagic, 8);
  header += key;
  header += Hasher().add(payload).hex();
  header += fmt::format("{:016x}", payload.size());
  std::vector<std::byte> file(header.size() + payload.size());
  std::memcpy(file.data(), header.data(), header.size());
  std::memcpy(file.data() + header.size(), payload.data(), payload.size());
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_ / bucket, ec);
    writeFileAtomically(pathFor(bucket, key), file);
  } catch (const Error& e) {
    // An entry that is not a file was reported when it was read; it costs this key, not the cache.
    if (!nonRegularFile(pathFor(bucket, key))) disable(e.what());
  }
}

}  // namespace foundry
