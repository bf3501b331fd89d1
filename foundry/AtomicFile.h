#pragma once
// Files that are either wholly written or not there at all: write a temporary beside the target,
// flush it, rename over the target. Readers never see half a file.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace foundry {

/// Writes `bytes` to `path` atomically; throws DeviceError naming the path on failure and leaves no
/// temporary behind.
void writeFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes);
void writeFileAtomically(const std::filesystem::path& path, std::string_view text);

/// Checks, before any work, that writeFileAtomically(path, ...) could succeed: `path` is not a
/// directory and a file can be created beside it. Throws the DeviceError the write would throw.
void checkWritableTarget(const std::filesystem::path& path);

/// The whole regular file, or nullopt if it cannot be opened or is not a regular file. It is opened
/// without blocking, so a FIFO or a device in its place never hangs the caller. `maxBytes` guards
/// against absurd files.
std::optional<std::vector<std::byte>> readWholeFile(const std::filesystem::path& path,
                                                    std::size_t maxBytes = std::size_t(1) << 31);

/// What stands at `path` when it is not a regular file ("a directory", "a FIFO", ...); nullopt for a
/// regular file or nothing at all. Symbolic links are followed.
std::optional<std::string> nonRegularFile(const std::filesystem::path& path);

}  // namespace foundry
