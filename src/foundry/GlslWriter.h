#pragma once
// Writes GLSL for people: indentation, a banner per stage, and #line markers so a compiler error
// names the snippet or stage a line came from. Remembers every block's text so errors can be quoted.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace foundry {

/// One origin of lines in a generated kernel: a snippet file, a stage's emitted code, or the builder.
struct SourceBlock {
  enum class Kind { Generated, Snippet, Stage };
  Kind kind = Kind::Generated;
  std::string name;                ///< the #line file name: "kernels/x.glsl", "stage HeadLayoutStage", kernel name
  std::vector<std::string> users;  ///< the stages that asked for a snippet
  std::vector<std::string> lines;  ///< the block's own lines, numbered from 1 as #line numbers them
  bool user = false;               ///< a user's own GLSL (a stage's text the library did not generate)
};

class GlslWriter {
 public:
  explicit GlslWriter(std::string generatedName);

  /// Appends one line at the current indentation.
  void line(std::string_view text);
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    line(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
  }
  void blank();
  /// Appends `head` and opens a brace block: `open("for (uint i = 0u; i < n; ++i)")`.
  void open(std::string_view head);
  template <typename... Args>
  void open(fmt::format_string<Args...> format, Args&&... args) {
    open(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
  }
  /// Closes the innermost block; `tail` follows the brace (e.g. " while (x);").
  void close(std::string_view tail = "");
  void indent() { ++depth_; }
  void dedent();

  /// A comment banner, e.g. between stages.
  void banner(std::string_view title);
  /// Starts a region whose lines come from a stage's emit(); errors there name the stage.
  void beginStage(std::string_view stageName);
  /// Returns to builder-generated lines.
  void endStage();
  /// Copies a snippet verbatim with a #line marker back to its file: kernels/<path>, or `origin` for
  /// a stage's own file. `user`: the text is a user's, not the library's (SourceBlock::user).
  void snippet(std::string_view path, std::string_view text, std::vector<std::string> users,
               std::string_view origin = {}, bool user = false);

  std::string str() const;
  const std::vector<SourceBlock>& blocks() const { return blocks_; }

 private:
  void raw(std::string text);  ///< a line with no indentation and no line accounting (a directive)
  void resumeGenerated();

  std::vector<std::string> out_;
  std::vector<SourceBlock> blocks_;
  std::size_t current_ = 0;  ///< index into blocks_ of the region being written
  int depth_ = 0;
};

}  // namespace foundry
