#include "foundry/GlslSource.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

GlslSource GlslSource::fromText(std::string name, std::string text) { return {std::move(name), std::move(text), {}}; }

GlslSource GlslSource::fromFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UserError(path.string(), "GLSL file not found or not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw UserError(path.string(), "cannot read the GLSL file");
  // The file name as an identifier: letters, digits and '_' kept, anything else '_', never a digit first.
  std::string name = "file_";
  for (const char c : path.filename().string()) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return {std::move(name), text.str(), path.string()};
}

}  // namespace foundry
