#include "foundry/GlslWriter.h"

#include "foundry/Error.h"

namespace foundry {

GlslWriter::GlslWriter(std::string generatedName) {
  blocks_.push_back({SourceBlock::Kind::Generated, std::move(generatedName), {}, {}});
}

void GlslWriter::raw(std::string text) { out_.push_back(std::move(text)); }

void GlslWriter::line(std::string_view text) {
  std::string s(static_cast<std::size_t>(depth_) * 2, ' ');
  s += text;
  auto& block = blocks_[current_];
  if (block.kind == SourceBlock::Kind::Generated) {
    // The generated block mirrors the whole output so its line numbers are the file's own.
    while (block.lines.size() < out_.size()) block.lines.emplace_back();
  }
  block.lines.push_back(s);
  out_.push_back(std::move(s));
}

void GlslWriter::blank() {
  const int depth = depth_;
  depth_ = 0;  // no trailing indentation on empty lines
  line(std::string_view());
  depth_ = depth;
}

void GlslWriter::open(std::string_view head) {
  line(fmt::format("{} {{", head));
  ++depth_;
}

void GlslWriter::close(std::string_view tail) {
  dedent();
  line(fmt::format("}}{}", tail));
}

void GlslWriter::dedent() {
  FOUNDRY_CHECK_INTERNAL(depth_ > 0, "GlslWriter: close() without a matching open()");
  --depth_;
}

void GlslWriter::banner(std::string_view title) {
  line(fmt::format("// ===== {} =====", title));
}

void GlslWriter::beginStage(std::string_view stageName) {
  blocks_.push_back({SourceBlock::Kind::Stage, fmt::format("stage {}", stageName), {std::string(stageName)}, {}});
  current_ = blocks_.size() - 1;
  raw(fmt::format("#line 1 \"{}\"", blocks_[current_].name));
}

void GlslWriter::endStage() { resumeGenerated(); }

void GlslWriter::resumeGenerated() {
  current_ = 0;
  // The next line of the output is line out_.size() + 1 of the generated file itself.
  raw(fmt::format("#line {} \"{}\"", out_.size() + 2, blocks_[0].name));
}

void GlslWriter::snippet(std::string_view path, std::string_view text, std::vector<std::string> users,
                         std::string_view origin, bool user) {
  SourceBlock block{SourceBlock::Kind::Snippet, origin.empty() ? fmt::format("kernels/{}", path) : std::string(origin),
                    std::move(users), {}, user};
  raw(fmt::format("#line 1 \"{}\"", block.name));
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    block.lines.emplace_back(text.substr(start, end - start));
    out_.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  blocks_.push_back(std::move(block));
  resumeGenerated();
}

std::string GlslWriter::str() const {
  std::string s;
  for (const auto& l : out_) {
    s += l;
    s += '\n';
  }
  return s;
}

}  // namespace foundry
