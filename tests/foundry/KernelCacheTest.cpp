// The compiler and its caches: memory hits, disk hits across a new cache instance (what a new process
// sees), corrupted and truncated entries rebuilt, an unusable directory tolerated.
#include <filesystem>
#include <fstream>
#include <latch>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/KernelCache.h"
#include "support/TempDir.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

class KernelCacheTest : public ::testing::Test {
 protected:
  DeviceInfo device = parseDevicePreset("lavapipe");
  test::TempDir dir;

  KernelSource kernel(float variant = 0) const {
    // `variant` changes the kernel's name and so its text: tests can make distinct kernels.
    return KernelBuilder(device, SnippetLibrary::embedded())
        .workgroup(64)
        .name(fmt::format("cache_test_{}", variant))
        .note("variant", std::to_string(variant))
        .add(std::make_shared<test::LoadStage>(DType::F32, 64))
        .add(std::make_shared<test::ScaleStage>(64))
        .add(std::make_shared<test::StoreStage>(DType::F32))
        .build();
  }
  std::shared_ptr<KernelCache> freshCache() const {
    return std::make_shared<KernelCache>(std::make_shared<ShaderCompiler>(),
                                         std::make_shared<DiskCache>(dir.path() / "cache"));
  }
  std::filesystem::path entryPath(const KernelCache& cache, const KernelSource& src) const {
    return dir.path() / "cache" / "spirv" / (cache.keyFor(src) + ".bin");
  }
};

TEST_F(KernelCacheTest, SecondBuildOfTheSameKernelDoesNotCompile) {
  auto cache = freshCache();
  const auto a = cache->spirv(kernel());
  EXPECT_EQ(cache->compiler().compileCount(), 1u);
  const auto b = cache->spirv(kernel());
  EXPECT_EQ(cache->compiler().compileCount(), 1u);
  EXPECT_EQ(cache->memoryHits(), 1u);
  EXPECT_EQ(*a, *b);
  cache->spirv(kernel(1));
  EXPECT_EQ(cache->compiler().compileCount(), 2u);
}

// Eight threads miss on one kernel at the same moment: one compiles it, the others wait for that
// compilation and get the same code; two distinct kernels compile once each.
TEST_F(KernelCacheTest, AKernelMissedByManyThreadsAtOnceIsCompiledOnce) {
  auto cache = freshCache();
  const KernelSource a = kernel(2), b = kernel(3);
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::shared_ptr<const Spirv>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      got[i] = cache->spirv(i % 2 ? b : a);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache->compiler().compileCount(), 2u);
  EXPECT_EQ(cache->compiles(), 2u);
  EXPECT_EQ(cache->memoryHits(), kThreads - 2u);
  for (int i = 2; i < kThreads; ++i) EXPECT_EQ(got[i], got[i % 2]) << "thread " << i << " has its own copy";
}

TEST_F(KernelCacheTest, DecisionNotesStayOutOfTheCompiledText) {
  // Notes explain a kernel in its dump; kernels that differ only in them are one kernel.
  auto build = [&](const std::string& reason) {
    return KernelBuilder(device, SnippetLibrary::embedded())
        .workgroup(64)
        .note("warps", reason)
        .add(std::make_shared<test::LoadStage>(DType::F32, 64))
        .add(std::make_shared<test::ScaleStage>(64))
        .add(std::make_shared<test::StoreStage>(DType::F32))
        .build();
  };
  const KernelSource a = build("default"), b = build("FOUNDRY_FA_DECODE_WARPS");
  EXPECT_EQ(a.glsl, b.glsl);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_NE(a.notes, b.notes);
  auto cache = freshCache();
  cache->spirv(a);
  cache->spirv(b);
  EXPECT_EQ(cache->compiler().compileCount(), 1u);
}

TEST_F(KernelCacheTest, TheCompilersOwnVersionsAreInTheKey) {
  // A newer glslang or SPIRV-Tools may compile the same text differently.
  const ShaderCompiler compiler;
  const std::string& id = compiler.identity();
  EXPECT_THAT(id, ::testing::HasSubstr("glslang "));
  EXPECT_THAT(id, ::testing::HasSubstr("shaderc "));
  EXPECT_THAT(id, ::testing::HasSubstr("spirv-tools "));
  EXPECT_THAT(id, ::testing::ContainsRegex("glslang [0-9]+\\.[0-9]+\\.[0-9]+"));
}

TEST_F(KernelCacheTest, DiskCacheSurvivesARestart) {
  const auto first = freshCache();
  const auto code = first->spirv(kernel());
  ASSERT_TRUE(std::filesystem::exists(entryPath(*first, kernel())));
  const auto second = freshCache();  // nothing shared in memory: as a new process
  const auto again = second->spirv(kernel());
  EXPECT_EQ(second->compiler().compileCount(), 0u);
  EXPECT_EQ(second->diskHits(), 1u);
  EXPECT_EQ(*code, *again);
}

TEST_F(KernelCacheTest, CorruptedEntryIsDetectedAndRebuilt) {
  const auto code = freshCache()->spirv(kernel());
  const auto cache = freshCache();
  const auto path = entryPath(*cache, kernel());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-7, std::ios::end);
    f.put('\x5a');  // flip bytes in the payload
  }
  const auto rebuilt = cache->spirv(kernel());
  EXPECT_EQ(cache->compiler().compileCount(), 1u);
  EXPECT_EQ(*rebuilt, *code);
  const auto third = freshCache();
  third->spirv(kernel());
  EXPECT_EQ(third->compiler().compileCount(), 0u) << "the rebuilt entry is valid again";
}

TEST_F(KernelCacheTest, TruncatedEntryIsDetectedAndRebuilt) {
  freshCache()->spirv(kernel());
  const auto cache = freshCache();
  const auto path = entryPath(*cache, kernel());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  cache->spirv(kernel());
  EXPECT_EQ(cache->compiler().compileCount(), 1u);
  DiskCache disk(dir.path() / "cache");
  EXPECT_TRUE(disk.load("spirv", cache->keyFor(kernel())).has_value());
}

TEST_F(KernelCacheTest, EntryForAnotherKeyIsRejected) {
  const auto cache = freshCache();
  cache->spirv(kernel(1));
  const auto other = entryPath(*cache, kernel(1));
  std::filesystem::copy_file(other, entryPath(*cache, kernel(2)));
  const auto fresh = freshCache();
  fresh->spirv(kernel(2));
  EXPECT_EQ(fresh->compiler().compileCount(), 1u);
}

TEST_F(KernelCacheTest, UnwritableDirectoryDisablesTheCacheAndWorkContinues) {
  const auto blocked = dir.path() / "blocked";
  std::ofstream(blocked) << "a file where the cache directory should be";
  KernelCache cache(std::make_shared<ShaderCompiler>(), std::make_shared<DiskCache>(blocked / "cache"));
  EXPECT_NO_THROW(cache.spirv(kernel()));
  EXPECT_EQ(cache.compiles(), 1u);
}

TEST_F(KernelCacheTest, DumpWritesTheKernelAndItsDecisions) {
  KernelCache cache(std::make_shared<ShaderCompiler>(), nullptr, (dir.path() / "dump").string());
  const auto src = kernel(3);
  cache.spirv(src);
  const auto comp = readWholeFile(dir.path() / "dump" / (src.name + ".comp"));
  const auto json = readWholeFile(dir.path() / "dump" / (src.name + ".json"));
  ASSERT_TRUE(comp && json);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(comp->data()), comp->size()), src.glsl);
  const std::string j(reinterpret_cast<const char*>(json->data()), json->size());
  EXPECT_THAT(j, ::testing::HasSubstr("\"variant\": \"3.000000\""));
  EXPECT_THAT(j, ::testing::HasSubstr("\"StoreStage\""));
}

TEST(AtomicFile, FailureLeavesNoFileBehind) {
  test::TempDir dir;
  EXPECT_THROW(writeFileAtomically(dir.path() / "missing" / "x.json", std::string_view("{}")), DeviceError);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  writeFileAtomically(dir.path() / "x.json", std::string_view("{}"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

}  // namespace
}  // namespace foundry
