// Two `foundry` processes building the same kernels into one fresh cache directory at the same time:
// both succeed, nothing half-written remains, and the cache they leave is whole — a third process
// compiles nothing and every entry verifies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "foundry/DiskCache.h"
#include "support/Subprocess.h"
#include "support/TempDir.h"

namespace foundry {
namespace {

namespace fs = std::filesystem;

struct CacheCounts {
  int compiled = -1, fromDisk = -1;
};

// "kernel cache: 3 compiled, 9 from disk, 0 from memory; disk cache <dir>"
CacheCounts countsOf(const std::string& out) {
  std::smatch m;
  const std::regex line(R"(kernel cache: (\d+) compiled, (\d+) from disk)");
  if (!std::regex_search(out, m, line)) return {};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

test::ProcessSpec foundry(const fs::path& cache, std::vector<std::string> args) {
  test::ProcessSpec spec;
  spec.argv = {FOUNDRY_EXECUTABLE};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env["FOUNDRY_CACHE_DIR"] = cache.string();
  spec.env["FOUNDRY_LOG_LEVEL"] = "warn";
  spec.timeoutSeconds = 300;
  return spec;
}

void expectWholeCache(const fs::path& dir, std::size_t expectedSpirv) {
  std::size_t spirv = 0;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << "a temporary file remains: " << it->path();
    if (!it->is_regular_file()) continue;
    const std::string bucket = it->path().parent_path().filename().string();
    DiskCache disk(dir);
    EXPECT_TRUE(disk.load(bucket, it->path().stem().string()).has_value()) << it->path() << " does not verify";
    EXPECT_EQ(disk.corrupt(), 0u) << it->path();
    if (bucket == "spirv") ++spirv;
  }
  EXPECT_EQ(spirv, expectedSpirv);
}

// Runs `args` twice at once on a fresh cache, then a third time, which must compile nothing.
void raceTwoThenCheck(const std::vector<std::string>& args, bool pipelineCache) {
  test::TempDir dir;
  const fs::path cache = dir.path() / "cache";
  test::ProcessResult a, b;
  {
    test::Process first(foundry(cache, args));
    test::Process second(foundry(cache, args));
    a = first.wait();
    b = second.wait();
  }
  for (const auto* r : {&a, &b}) {
    ASSERT_FALSE(r->timedOut) << r->summary();
    EXPECT_EQ(r->exitCode, 0) << r->summary();
    EXPECT_EQ(r->err, "") << "no warning: neither process may see the other's half-written entry\n" << r->summary();
  }
  const CacheCounts ca = countsOf(a.out), cb = countsOf(b.out);
  ASSERT_GE(ca.compiled, 0) << a.out;
  ASSERT_GE(cb.compiled, 0) << b.out;
  const int kernels = ca.compiled + ca.fromDisk;
  ASSERT_GT(kernels, 0);
  EXPECT_EQ(cb.compiled + cb.fromDisk, kernels);
  // Each kernel was compiled by at least one of the two.
  EXPECT_GE(ca.compiled + cb.compiled, kernels);

  const test::ProcessResult c = test::runProcess(foundry(cache, args));
  EXPECT_EQ(c.exitCode, 0) << c.summary();
  EXPECT_EQ(c.err, "") << c.summary();
  const CacheCounts cc = countsOf(c.out);
  EXPECT_EQ(cc.compiled, 0) << c.out;
  EXPECT_EQ(cc.fromDisk, kernels) << c.out;
  expectWholeCache(cache, static_cast<std::size_t>(kernels));
  if (pipelineCache) {
    EXPECT_TRUE(fs::exists(cache / "pipeline")) << "the pipeline cache was not saved";
  }
}

TEST(CacheConcurrency, TwoProcessesCompileTheSameKernelsAtOnce) {
  raceTwoThenCheck({"kernels", "--pretend", "lavapipe", "--compile"}, false);
}

// With a device: the SPIR-V cache and the saved VkPipelineCache, both written by two processes.
TEST(CacheConcurrency, TwoProcessesBuildPipelinesAtOnce) {
  raceTwoThenCheck({"kernels", "--stats", "--heads", "8", "--kv-heads", "2", "--head-dim", "64"}, true);
}

}  // namespace
}  // namespace foundry
