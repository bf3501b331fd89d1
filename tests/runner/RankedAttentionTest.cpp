// What a run over several ranks refuses before anything runs (RankedAttention::checkSupported): each
// feature on its own, named, as an UnsupportedError; a plain config passes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "foundry/Error.h"
#include "foundry/runner/RankedAttention.h"
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

}  // namespace
}  // namespace foundry
