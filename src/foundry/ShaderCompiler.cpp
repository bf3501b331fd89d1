#include "foundry/ShaderCompiler.h"

#include <algorithm>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glslang/build_info.h>
#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>

#include "foundry/Error.h"

namespace foundry {

ShaderCompiler::ShaderCompiler(Optimization optimization, const std::string& externalGlslc)
    : optimization_(optimization) {
  unsigned version = 0, revision = 0;
  shaderc_get_spv_version(&version, &revision);
  // The compilers' own versions, not only the SPIR-V they target: a newer glslang or SPIRV-Tools may
  // emit different code for the same text, so a cache filled by one must not serve the other.
  identity_ = fmt::format("shaderc {} glslang {}.{}.{}{} spirv-tools {} spv{}.{} vulkan1.2 opt={}", FOUNDRY_SHADERC_VERSION,
                          GLSLANG_VERSION_MAJOR, GLSLANG_VERSION_MINOR, GLSLANG_VERSION_PATCH, GLSLANG_VERSION_FLAVOR,
                          FOUNDRY_SPIRV_TOOLS_VERSION, version, revision,
                          optimization == Optimization::Performance ? "performance" : "none");
  if (!externalGlslc.empty()) {
    external_ = std::make_shared<ExternalGlslc>(externalGlslc);
    coopMat2Identity_ = fmt::format("glslc '{}' {} vulkan1.3", externalGlslc, external_->version());
  }
}

std::vector<std::uint32_t> ShaderCompiler::compile(const KernelSource& source) const {
  ++count_;
  if (source.usesCoopMat2) {
    if (!coopMat2()) {
      throw UnsupportedError(fmt::format(
          "kernel {} uses GL_NV_cooperative_matrix2, which this build's shaderc cannot compile; {}", source.name,
          external_ ? external_->problem()
                    : std::string("set FOUNDRY_GLSLC to a glslc that can (bash scripts/newer-compilers.sh makes one)")));
    }
    try {
      return external_->compile(source.glsl, source.name);
    } catch (const DeviceError& e) {
      throwCompileError(source, e.what());
    }
  }
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  // Cooperative-matrix kernels skip spirv-opt: Debian's SPIRV-Tools crashes folding some
  // cooperative-matrix arithmetic, and the drivers that run them optimise on their own anyway.
  const bool optimise = optimization_ == Optimization::Performance && !source.usesCoopMat;
  options.SetOptimizationLevel(optimise ? shaderc_optimization_level_performance : shaderc_optimization_level_zero);
  const auto result = compiler.CompileGlslToSpv(source.glsl, shaderc_compute_shader,
                                                (source.name + ".comp").c_str(), "main", options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success) {
    throwCompileError(source, result.GetErrorMessage());
  }
  return {result.cbegin(), result.cend()};
}

std::string ShaderCompiler::rejects(const std::vector<std::uint32_t>& spirv, bool coopMat2) const {
  if (spirv.empty() || spirv[0] != 0x07230203u) return "does not start with the SPIR-V magic number";
  if (coopMat2) return external_ ? external_->rejects(spirv) : "was made by a glslc that is no longer given";
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string first;
  tools.SetMessageConsumer([&first](spv_message_level_t, const char*, const spv_position_t&, const char* message) {
    if (first.empty()) first = message;
  });
  if (tools.Validate(spirv)) return "";
  return "spirv-val rejects: " + printable(first.empty() ? "invalid" : first);
}

namespace {

// glslang reports "<file>:<line>: error: ..." where <file> is the #line name of the block.
struct Located {
  const SourceBlock* block = nullptr;
  int line = 0;
  bool error = false;
};

bool locate(const KernelSource& source, const std::string& line, Located& at) {
  static const std::regex located(R"(^(.*?):(\d+): (error|warning): (.*)$)");
  std::smatch m;
  if (!std::regex_match(line, m, located)) return false;
  const std::string file = m[1];
  const auto block = std::find_if(source.blocks.begin(), source.blocks.end(), [&](const SourceBlock& b) { return b.name == file; });
  at = {block == source.blocks.end() ? nullptr : &*block, std::stoi(m[2]), m[3] == "error"};
  return true;
}

}  // namespace

[[noreturn]] void throwCompileError(const KernelSource& source, const std::string& compilerMessage) {
  std::istringstream in(compilerMessage);
  std::string line;
  Located at;
  while (std::getline(in, line)) {
    if (!locate(source, line, at) || !at.error) continue;
    if (at.block && at.block->user) {
      throw UserError(at.block->name, describeCompileError(source, compilerMessage));
    }
    break;
  }
  throw DeviceError(describeCompileError(source, compilerMessage));
}

std::string describeCompileError(const KernelSource& source, const std::string& compilerMessage) {
  std::ostringstream out;
  out << fmt::format("compiling kernel {} (stages {}) failed:\n", source.name, fmt::join(source.stages, " -> "));
  std::istringstream in(compilerMessage);
  std::string line;
  int quoted = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Located at;
    out << "  " << line << "\n";
    if (!locate(source, line, at)) continue;
    const int lineNo = at.line;
    if (quoted >= 3) continue;  // the first errors are the useful ones
    const SourceBlock* block = at.block;
    if (!block) continue;
    ++quoted;
    switch (block->kind) {
      case SourceBlock::Kind::Snippet:
        out << fmt::format("  in snippet {} (used by {}):\n", block->name, fmt::join(block->users, ", "));
        break;
      case SourceBlock::Kind::Stage:
        out << fmt::format("  in the code emitted by {}:\n", block->users.empty() ? block->name : block->users[0]);
        break;
      case SourceBlock::Kind::Generated:
        out << fmt::format("  in the declarations the builder generated:\n");
        break;
    }
    const int first = std::max(1, lineNo - 2);
    const int last = std::min(static_cast<int>(block->lines.size()), lineNo + 2);
    for (int i = first; i <= last; ++i) {
      out << fmt::format("  {} {:4} | {}\n", i == lineNo ? ">" : " ", i, block->lines[static_cast<std::size_t>(i - 1)]);
    }
  }
  std::string s = out.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace foundry
