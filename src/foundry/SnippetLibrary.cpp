#include "foundry/SnippetLibrary.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {
namespace detail {
struct EmbeddedSnippet {
  const char* path;
  const char* text;
  std::size_t size;
};
extern const EmbeddedSnippet kEmbeddedSnippets[];
}  // namespace detail

std::shared_ptr<const SnippetLibrary> SnippetLibrary::embedded() {
  static const std::shared_ptr<const SnippetLibrary> lib = [] {
    std::shared_ptr<SnippetLibrary> l(new SnippetLibrary());
    l->origin_ = "embedded";
    for (const auto* s = detail::kEmbeddedSnippets; s->path; ++s) {
      l->texts_.emplace(s->path, std::string(s->text, s->size));
    }
    return l;
  }();
  return lib;
}

std::shared_ptr<const SnippetLibrary> SnippetLibrary::fromDirectory(std::string directory) {
  if (!std::filesystem::is_directory(directory)) {
    throw UserError("FOUNDRY_KERNEL_DIR",
                    fmt::format("'{}' is not a directory", printable(directory, std::string::npos)));
  }
  std::shared_ptr<SnippetLibrary> l(new SnippetLibrary());
  l->origin_ = directory;
  l->directory_ = std::move(directory);
  return l;
}

std::shared_ptr<const SnippetLibrary> SnippetLibrary::select(const std::string& directory) {
  return directory.empty() ? embedded() : fromDirectory(directory);
}

const std::string& SnippetLibrary::text(const std::string& path) const {
  std::lock_guard lock(mutex_);
  if (auto it = texts_.find(path); it != texts_.end()) return it->second;
  if (directory_.empty()) {
    throw InternalError(fmt::format("snippet kernels/{} is not embedded in this binary", path));
  }
  const auto file = std::filesystem::path(directory_) / path;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw UserError("FOUNDRY_KERNEL_DIR", fmt::format("snippet '{}' not found (looked for {})", path, file.string()));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return texts_.emplace(path, ss.str()).first->second;
}

std::vector<std::string> SnippetLibrary::dependencies(const std::string& path) const {
  return snippetRequirements(text(path));
}

bool SnippetLibrary::has(const std::string& path) const {
  {
    std::lock_guard lock(mutex_);
    if (texts_.count(path)) return true;
  }
  return !directory_.empty() && std::filesystem::is_regular_file(std::filesystem::path(directory_) / path);
}

std::vector<std::string> snippetRequirements(const std::string& t) {
  std::vector<std::string> out;
  std::istringstream in(t);
  std::string line;
  const std::string tag = "//! requires:";
  while (std::getline(in, line)) {
    if (!line.starts_with("//!")) {
      if (line.empty() || line.starts_with("//")) continue;
      break;  // requirements sit at the top, before any code
    }
    if (!line.starts_with(tag)) continue;
    std::istringstream names(line.substr(tag.size()));
    std::string name;
    while (names >> name) out.push_back(name);
  }
  return out;
}

std::vector<std::string> SnippetLibrary::list() const {
  std::vector<std::string> out;
  if (directory_.empty()) {
    for (const auto& [path, _] : texts_) out.push_back(path);
  } else {
    for (const auto& e : std::filesystem::recursive_directory_iterator(directory_)) {
      if (e.is_regular_file() && e.path().extension() == ".glsl") {
        out.push_back(std::filesystem::relative(e.path(), directory_).generic_string());
      }
    }
  }
  return out;
}

}  // namespace foundry
