#include "foundry/FileIdentity.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "foundry/Error.h"

namespace foundry {

namespace fs = std::filesystem;

fs::path followSymlinks(const fs::path& path) {
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) return p;
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  throw DeviceError(fmt::format("cannot write {}: Too many levels of symbolic links", path.string()));
}

bool sameFile(const fs::path& a, const fs::path& b) {
  struct stat sa {};
  struct stat sb {};
  const bool aExists = ::stat(a.c_str(), &sa) == 0, bExists = ::stat(b.c_str(), &sb) == 0;
  if (aExists && bExists) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (aExists != bExists) return false;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(followSymlinks(a), ea), cb = fs::weakly_canonical(followSymlinks(b), eb);
  return !ea && !eb && ca == cb;
}

void checkOutputsApart(const std::vector<PathArgument>& inputs, const std::vector<PathArgument>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const PathArgument& out = outputs[i];
    if (out.path.empty()) continue;
    auto refuse = [&](const PathArgument& other, const char* consequence) {
      const std::string alias = other.path == out.path ? "" : fmt::format(" {}", other.path.string());
      throw UserError(out.flag, fmt::format("{} is also the {} file{}; {}: name another file", out.path.string(),
                                            other.flag, alias, consequence));
    };
    for (const PathArgument& in : inputs) {
      if (!in.path.empty() && sameFile(out.path, in.path)) {
        refuse(in, "writing it would replace an input of this run");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && sameFile(out.path, outputs[j].path)) {
        refuse(outputs[j], "one output would replace the other");
      }
    }
  }
}

}  // namespace foundry
