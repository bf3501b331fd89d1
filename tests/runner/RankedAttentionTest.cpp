// What a run over several ranks refuses before anything runs (RankedAttention::checkSupported): each
// feature on its own, named, as an UnsupportedError; a plain config passes. What each rank's memory
// check counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "foundry/Error.h"
#include "foundry/runner/RankedAttention.h"
#include "foundry/runner/RunMemory.h"
#include "foundry/runner/Session.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

RunRequest tinyLlama() {
  RunRequest r;
  r.config = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/tinyllama-1.1b.json");
  return r;
}

TEST(RankedAttention, APlainConfigRuns) { EXPECT_NO_THROW(RankedAttention::checkSupported(tinyLlama())); }

TEST(RankedAttention, RefusesWhatTheRanksDoNotRunNamingIt) {
  const std::vector<std::pair<std::function<void(RunRequest&)>, const char*>> cases = {
      {[](RunRequest& r) { r.save = "o.safetensors"; }, "--inputs, --expect and --save"},
      {[](RunRequest& r) { r.path = AttentionPath::Reference; }, "--path reference"},
      {[](RunRequest& r) { r.config.run.promptLens = {10, 20}; }, "--prompt-lens"},
      {[](RunRequest& r) { r.config.run.pageSize = 16; }, "--page-size"},
      {[](RunRequest& r) { r.config.run.kvDtype = DType::I8; }, "--kv-dtype int8"},
      {[](RunRequest& r) { r.config.valueDim = 32; }, "values of another width"},
  };
  for (const auto& [change, name] : cases) {
    RunRequest r = tinyLlama();
    change(r);
    EXPECT_THAT([&] { RankedAttention::checkSupported(r); },
                ThrowsMessage<UnsupportedError>(HasSubstr(std::string(name))))
        << name;
  }
  RunRequest gemma;
  gemma.config = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/gemma-2-9b.json");
  EXPECT_THAT([&] { RankedAttention::checkSupported(gemma); },
              ThrowsMessage<UnsupportedError>(HasSubstr("attention modifiers (layer 0) in a run over several ranks")));
}

// Each rank's memory check counts the cache rows it keeps (a trial found every rank budgeted for the
// whole sequence, so a run whose share fit each device was refused as the one-device run was).
TEST(RankedAttention, EachRanksMemoryCountsItsOwnCacheRows) {
  RunRequest r = tinyLlama();
  r.config.run.promptLen = 1000;
  r.config.run.decodeTokens = 24;
  std::uint32_t rows = 0;
  for (std::uint32_t rank = 0; rank < 3; ++rank) rows += RankedAttention::cacheRowsOf(1000, 24, 3, rank);
  EXPECT_EQ(rows, 1024u) << "the ranks' rows cover every position once";
  const auto cacheBytes = [&](std::optional<std::uint32_t> cacheRows) {
    const MemoryPlan plan = runMemoryPlan(r, {}, DeviceInfo{}, cacheRows);
    for (const auto& b : plan.device) {
      if (b.name == "k_cache0") return b.bytes;
    }
    return std::uint64_t{0};
  };
  const std::uint32_t last = RankedAttention::cacheRowsOf(1000, 24, 3, 2);
  EXPECT_LT(last, 1024u);
  EXPECT_EQ(cacheBytes(last) * 1024, cacheBytes(std::nullopt) * last);
}

}  // namespace
}  // namespace foundry
