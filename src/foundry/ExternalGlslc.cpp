#include "foundry/ExternalGlslc.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "foundry/Error.h"

extern char** environ;

namespace foundry {

namespace {

namespace fs = std::filesystem;

/// A fresh private directory under the system's temporary directory, removed with this object.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "foundry-glslc.XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw DeviceError(fmt::format("cannot create a directory like {}", pattern));
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  fs::path operator/(const char* name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Runs argv with stdout and stderr into `output`; the exit status, or -1 where it could not start.
int run(const std::vector<std::string>& argv, const fs::path& output) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The smallest kernel that needs what the workgroup-scope prefill uses: a workgroup-scope product,
/// a row reduction, an element operation and an accumulator-to-operand conversion, on operands of
/// `type` (float16_t, or bfloat16_t with GL_EXT_bfloat16: glslang 15.3 and newer).
std::string probe(const char* type, const char* typeExtension) {
  return fmt::format(R"(#version 450
#extension {1} : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B {{ float b[]; }};
float add(const in float x, const in float y) {{ return x + y; }}
float twice(const in uint r, const in uint c, const in float x) {{ return 2.0 * x; }}
void main() {{
  coopmat<float, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseAccumulator> s, t;
  coopMatLoad(s, b, 0, 32, gl_CooperativeMatrixLayoutRowMajor);
  coopMatReduceNV(t, s, gl_CooperativeMatrixReduceRowNV, add);
  coopMatPerElementNV(t, t, twice);
  coopmat<{0}, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseA> a = coopmat<{0}, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseA>(t);
  coopmat<{0}, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseB> one = coopmat<{0}, gl_ScopeWorkgroup, 32, 32, gl_MatrixUseB>(1.0);
  t = coopMatMulAdd(a, one, t);
  coopMatStore(t, b, 0, 32, gl_CooperativeMatrixLayoutRowMajor);
}}
)",
                     type, typeExtension);
}

}  // namespace

ExternalGlslc::ExternalGlslc(std::string command) : command_(std::move(command)) {
  try {
    ScratchDir dir;
    if (run({command_, "--version"}, dir / "version.txt") != 0) {
      problem_ = fmt::format("'{}' --version did not run", printable(command_));
      return;
    }
    std::istringstream text(readText(dir / "version.txt"));
    std::getline(text, version_);
    compile(probe("float16_t", "GL_EXT_shader_explicit_arithmetic_types_float16"), "coopmat2_probe");
    coopMat2_ = true;
    try {
      compile(probe("bfloat16_t", "GL_EXT_bfloat16"), "coopmat2_bf16_probe");
      bf16_ = true;
    } catch (const Error& e) {
      bf16Problem_ = fmt::format("'{}' does not compile GL_EXT_bfloat16: {}", printable(command_), e.what());
    }
  } catch (const Error& e) {
    problem_ = fmt::format("'{}' does not compile GL_NV_cooperative_matrix2: {}", printable(command_), e.what());
  } catch (const std::exception& e) {
    problem_ = e.what();
  }
}

std::vector<std::uint32_t> ExternalGlslc::compile(const std::string& glsl, const std::string& name) const {
  ScratchDir dir;
  const fs::path source = dir / "kernel.comp", output = dir / "kernel.spv", log = dir / "log.txt";
  std::ofstream(source, std::ios::binary) << glsl;
  const int status = run({command_, "-fshader-stage=compute", "--target-env=vulkan1.3", "-o", output.string(),
                          source.string()},
                         log);
  std::string message = readText(log);
  // glslc names the file it read; errors should name the kernel.
  for (std::size_t at = 0; (at = message.find(source.string(), at)) != std::string::npos;) {
    message.replace(at, source.string().size(), name + ".comp");
  }
  if (status != 0) {
    throw DeviceError(status < 0 ? fmt::format("could not run {}", printable(command_)) : message);
  }
  const std::string bytes = readText(output);
  if (bytes.size() < 20 || bytes.size() % 4 != 0) {
    throw DeviceError(fmt::format("{} wrote {} bytes for kernel {}, not SPIR-V", printable(command_), bytes.size(), name));
  }
  std::vector<std::uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

std::string ExternalGlslc::rejects(const std::vector<std::uint32_t>& spirv) const {
  const fs::path validator = fs::path(command_).parent_path() / "spirv-val";
  if (!fs::exists(validator)) return "";
  ScratchDir dir;
  const fs::path module = dir / "kernel.spv", log = dir / "log.txt";
  std::ofstream(module, std::ios::binary).write(reinterpret_cast<const char*>(spirv.data()),
                                                static_cast<std::streamsize>(spirv.size() * 4));
  if (run({validator.string(), "--target-env", "vulkan1.3", module.string()}, log) == 0) return "";
  std::istringstream text(readText(log));
  std::string first;
  std::getline(text, first);
  return "spirv-val rejects: " + printable(first.empty() ? "invalid" : first);
}

}  // namespace foundry
