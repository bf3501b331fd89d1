#pragma once
// Which file a path names, whatever its spelling: symbolic links followed, existing files compared by
// device and inode (so a link or a hard link to a file is that file), new ones by their canonical path.
// A command uses it to refuse an output that would replace one of its own inputs or another output.
#include <filesystem>
#include <string>
#include <vector>

namespace foundry {

/// `path` with every symbolic link in its last component followed, a dangling one too (to the file it
/// would create). Throws DeviceError naming `path` after 40 links (a loop).
std::filesystem::path followSymlinks(const std::filesystem::path& path);

/// Whether `a` and `b` name one file: the same device and inode when both exist, otherwise the same
/// canonical path (links followed).
bool sameFile(const std::filesystem::path& a, const std::filesystem::path& b);

/// A file a command reads or writes and what named it: a flag ("--json") or an argument ("config").
struct PathArgument {
  std::string flag;
  std::filesystem::path path;
};

/// Throws UserError (field: the output's flag) when an output is the same file as an input or as an
/// earlier output, naming both flags and the path. Empty paths are skipped. Call it before any work.
void checkOutputsApart(const std::vector<PathArgument>& inputs, const std::vector<PathArgument>& outputs);

}  // namespace foundry
