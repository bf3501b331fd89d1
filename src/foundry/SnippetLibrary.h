#pragma once
// The GLSL snippets under kernels/: embedded into the binary at build time, or read from a directory
// (FOUNDRY_KERNEL_DIR) so kernel work needs no rebuild.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace foundry {

/// The snippets named by `//! requires:` lines at the top of a snippet's text.
std::vector<std::string> snippetRequirements(const std::string& text);

class SnippetLibrary {
 public:
  /// The snippets compiled into this binary.
  static std::shared_ptr<const SnippetLibrary> embedded();
  /// Reads snippets from `directory` (the kernels/ folder of a checkout) on first use.
  static std::shared_ptr<const SnippetLibrary> fromDirectory(std::string directory);
  /// `directory` if non-empty, else the embedded ones.
  static std::shared_ptr<const SnippetLibrary> select(const std::string& directory);

  /// The text of `path` (relative to kernels/). A missing snippet is an InternalError for the embedded
  /// library and a UserError naming the file for a directory.
  const std::string& text(const std::string& path) const;
  /// Snippets named by `//! requires: a.glsl b.glsl` lines at the top of `path`.
  std::vector<std::string> dependencies(const std::string& path) const;
  /// Whether `path` can be read (embedded, or a file under the directory).
  bool has(const std::string& path) const;
  std::vector<std::string> list() const;
  const std::string& origin() const { return origin_; }

 private:
  SnippetLibrary() = default;
  std::string origin_;     ///< "embedded" or the directory
  std::string directory_;  ///< empty when embedded
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::string> texts_;
};

}  // namespace foundry
