#pragma once
// GLSL a stage carries itself rather than a snippet under kernels/: a user's modifier or stage brings
// its functions as a string or as a file of its own.
#include <filesystem>
#include <string>

namespace foundry {

struct GlslSource {
  std::string name;    ///< the snippet's name in a kernel: a GLSL identifier, unique per text
  std::string text;
  std::string origin;  ///< the file it was read from ("" for a string)

  /// GLSL given as a string, named `name` (a GLSL identifier).
  static GlslSource fromText(std::string name, std::string text);
  /// Reads `path` now, so a missing or unreadable file is a UserError naming it when the stage is made,
  /// not when a kernel is built. The snippet is named after the file (`my_mask.glsl` -> file_my_mask_glsl);
  /// compile errors in it name the path and line.
  static GlslSource fromFile(const std::filesystem::path& path);
};

}  // namespace foundry
