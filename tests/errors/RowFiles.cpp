#include "errors/RowFiles.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "foundry/DiskCache.h"
#include "foundry/KernelCache.h"
#include "foundry/runner/io/Safetensors.h"
#include "support/TempDir.h"

namespace foundry::errors {

namespace fs = std::filesystem;

void writeBytes(const fs::path& p, const std::string& bytes) {
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json baseConfig() {
  return nlohmann::json::parse(R"({
    "name": "Base", "source": "test/base",
    "attention": {"layers": 32, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "max_context": 4096,
                  "rope": {"theta": 500000.0, "pairing": "rotate_half"}},
    "run": {"batch": 1, "prompt_len": 64, "decode_tokens": 8, "dtype": "f16"}
  })");
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &v, 8);
  return out;
}

std::string safetensors(const std::string& header, std::size_t dataBytes) {
  return le64(header.size()) + header + std::string(dataBytes, '\0');
}

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"a":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
}

std::vector<std::string> runTiny(std::vector<std::string> extra, const std::vector<std::string>& sizes) {
  std::vector<std::string> args = {"run", kTiny};
  args.insert(args.end(), sizes.begin(), sizes.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string lineWith(const std::string& text, const std::string& needle) {
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

const std::map<std::string, std::optional<std::string>> kCacheEnv = {{"FOUNDRY_CACHE_DIR", "{tmp}/cache"}};
const std::vector<std::string> kCompile = {"kernels", "--pretend", "lavapipe", "--compile"};

fs::path defaultCache(const fs::path& tmp) {
  const char* shared = std::getenv("FOUNDRY_CACHE_DIR");
  if (shared != nullptr && *shared != '\0' && std::string_view(shared) != "off") return shared;
  return tmp / ".cache";
}

/// A directory that `kCompile` filled from empty: made by the first row that asks, once per process,
/// and removed at exit. Rows copy it rather than compiling every lavapipe kernel again each. With a
/// suite's cache (FOUNDRY_CACHE_DIR) the kernels are compiled into that one (`kCompile --dump`) and the
/// seed gets their entries, found by key (the GLSL and the compiler's identity): the files a run into
/// an empty directory leaves, compiled once for the release and sanitizer builds and both of their
/// shards rather than in each (under ASan, 20 s apiece).
const fs::path& lavapipeCacheSeed(const CliContext& ctx) {
  static const test::TempDir dir;
  static const fs::path seed = [&] {
    const fs::path cache = dir.path() / "cache";
    const fs::path shared = defaultCache(dir.path());
    if (shared.string().starts_with(dir.path().string())) {
      ctx.foundry(kCompile, {{"FOUNDRY_CACHE_DIR", cache.string()}});
      return cache;
    }
    const fs::path dump = dir.path() / "dump";
    std::vector<std::string> args = kCompile;
    args.insert(args.end(), {"--dump", dump.string()});
    ctx.foundry(args, {{"FOUNDRY_CACHE_DIR", shared.string()}});
    const KernelCache keys(std::make_shared<ShaderCompiler>(ShaderCompiler::Optimization::Performance), nullptr);
    const DiskCache from(shared), to(cache);
    for (const auto& e : fs::directory_iterator(dump)) {
      if (e.path().extension() != ".comp") continue;
      KernelSource source;
      source.glsl = readText(e.path());
      const std::string key = keys.keyFor(source);
      fs::create_directories(to.pathFor("spirv", key).parent_path());
      fs::copy_file(from.pathFor("spirv", key), to.pathFor("spirv", key));
    }
    return cache;
  }();
  return seed;
}

fs::path firstCacheEntry(const CliContext& ctx) {
  // What `ctx.foundry(kCompile, kCacheEnv)` leaves in an empty {tmp}/cache, copied.
  fs::copy(lavapipeCacheSeed(ctx), ctx.tmp / "cache", fs::copy_options::recursive);
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(ctx.tmp / "cache" / "spirv")) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  if (entries.empty()) throw std::runtime_error("the first run left no cache entry");
  return entries.front();
}

std::function<std::string(const CliContext&, const CliOutcome&)> compiledThenAgain(int compiled, int again) {
  return [compiled, again](const CliContext& ctx, const CliOutcome& o) -> std::string {
    const std::string line = lineWith(o.out, "kernel cache: ");
    if (line.find(fmt::format("kernel cache: {} compiled,", compiled)) == std::string::npos) {
      return fmt::format("expected {} kernel(s) compiled, got: {}", compiled, line);
    }
    const std::string next = lineWith(ctx.foundry(kCompile, kCacheEnv), "kernel cache: ");
    if (next.find(fmt::format("kernel cache: {} compiled,", again)) == std::string::npos) {
      return fmt::format("expected {} compiled by the next run, got: {}", again, next);
    }
    return "";
  };
}

void copyTiny(const CliContext& ctx) {
  fs::copy_file(ctx.source / "configs" / "tinyllama-1.1b.json", ctx.tmp / "tinyllama.json");
}

void writeTensors(const fs::path& p, const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors) {
  std::vector<NamedTensor> named;
  for (const auto& [name, shape] : tensors) {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    std::vector<float> ramp(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = 0.125f * static_cast<float>(static_cast<int>(i % 17) - 8);
    named.push_back({name, shape, std::move(ramp)});
  }
  writeSafetensors(p, named, DType::F16);
}

std::vector<std::string> entriesUnder(const fs::path& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = it->path().lexically_relative(dir).string();  // a link is listed, not followed
    if (rel == ".cache" || rel.starts_with(".cache/")) continue;
    out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::function<std::string(const CliContext&, const CliOutcome&)> leavesOnly(std::vector<std::string> expected) {
  return [expected](const CliContext& ctx, const CliOutcome&) -> std::string {
    auto want = expected;
    std::sort(want.begin(), want.end());
    const auto got = entriesUnder(ctx.tmp);
    if (got == want) return "";
    return fmt::format("expected only [{}] under the row's directory, found [{}]", fmt::join(want, ", "),
                       fmt::join(got, ", "));
  };
}

}  // namespace foundry::errors
