#pragma once
// Files that are either wholly written or not there at all: write a temporary beside the target,
// flush it, rename over the target. Readers never see half a file.
//
// What a target may be: a new name; a regular file, which is replaced and keeps its mode (and its
// owner and group where the process may set them); or a symbolic link, which is followed: the file it
// points to is replaced, its temporary made in that file's directory, and the link stays. Anything
// else (a directory, a FIFO, a device node such as /dev/null, a socket) is refused with a UserError
// that says what it is; it is looked at with stat(), so a FIFO is never opened. docs/reliability.md
// says why, and what happens to the temporaries of a write that a signal ends.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace foundry {

/// Writes `bytes` to `path` atomically; throws DeviceError naming the path when the file system
/// fails, UserError when the path names something that is not a regular file, and leaves no
/// temporary behind either way.
void writeFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes);
void writeFileAtomically(const std::filesystem::path& path, std::string_view text);

/// Checks, before any work, that writeFileAtomically(path, ...) could succeed: `path` names no
/// directory or other non-regular file and a file can be created beside its target. Throws the error
/// the write would throw, prefixed with `flag` (the option that named the path) when one is given.
void checkWritableTarget(const std::filesystem::path& path, std::string_view flag = {});

/// The whole regular file, or nullopt if it cannot be opened or is not a regular file. It is opened
/// without blocking, so a FIFO or a device in its place never hangs the caller. `maxBytes` guards
/// against absurd files.
std::optional<std::vector<std::byte>> readWholeFile(const std::filesystem::path& path,
                                                    std::size_t maxBytes = std::size_t(1) << 31);

/// A descriptor to read `path` from, or -1 with errno set. The open never waits for a writer (a FIFO
/// that has none then reads as empty); reads after it block as usual, so a pipe with a writer (a
/// shell's `<(...)`) reads whole.
int openForReading(const std::filesystem::path& path);

/// What stands at `path` when it is not a regular file ("a directory", "a FIFO", ...); nullopt for a
/// regular file or nothing at all. Symbolic links are followed.
std::optional<std::string> nonRegularFile(const std::filesystem::path& path);

}  // namespace foundry
