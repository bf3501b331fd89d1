// `foundry run` in process: a real config end to end on the test device with the check on; the
// memory the flash path needs does not grow with q_len x kv_len, the materialised path's does.
#include <gtest/gtest.h>

#include "runner/Session.h"
#include "support/TestRuntime.h"

namespace foundry {
namespace {

class QuietProgress : public Progress {
 public:
  void update(const std::string&, std::uint64_t, std::uint64_t) override {}
};

ModelConfig tinyConfig(std::uint32_t prompt, std::uint32_t decode, std::uint32_t layers) {
  ModelConfig c = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/tinyllama-1.1b.json");
  RunOverrides o;
  o.promptLen = prompt;
  o.decodeTokens = decode;
  o.layers = layers;
  return applyOverrides(c, o);
}

RunReport run(const ModelConfig& c, AttentionPath path, bool check) {
  RunRequest req;
  req.config = c;
  req.path = path;
  req.check = check;
  QuietProgress progress;
  return runModel(test::runtime(), req, progress);
}

TEST(Session, ARealConfigRunsEndToEndAndPassesItsCheck) {
  const RunReport r = run(tinyConfig(40, 5, 2), AttentionPath::Flash, true);
  ASSERT_TRUE(r.check.ran);
  EXPECT_TRUE(r.check.passed) << r.summary();
  EXPECT_GT(r.check.rows, 0u);
  EXPECT_GT(r.prefill.gpuMicros, 0.0);
  EXPECT_GT(r.decode.gpuMicros, 0.0);
  EXPECT_EQ(r.prefill.tokens, 40u);
  EXPECT_EQ(r.decode.tokens, 5u);
  // Prefill per layer: RoPE, KV append, attention; decode per layer and token: KV append, fused decode.
  std::uint64_t attention = 0, appends = 0;
  for (const auto& [kernel, n] : r.kernels) {
    if (kernel.find("SdpaPrefill") != std::string::npos || kernel.find("FlashDecodeFused") != std::string::npos) attention += n;
    if (kernel.starts_with("KvAppend")) appends += n;
  }
  EXPECT_EQ(attention, 2u * (1 + 5));
  EXPECT_EQ(appends, 2u * (1 + 5));
  EXPECT_GT(r.cacheBytes, 0u);
}

TEST(Session, FlashNeedsNoScratchProportionalToQueriesTimesKeysTheMaterialisedPathDoes) {
  const ModelConfig c = tinyConfig(192, 0, 1);
  const RunReport flash = run(c, AttentionPath::Flash, false);
  const RunReport reference = run(c, AttentionPath::Reference, false);
  const std::uint64_t scores = std::uint64_t(c.run.batch) * c.nHeads * 192 * 192 * 4;  // f32 scores
  // The materialised path holds the whole score matrix, and the report shows it.
  EXPECT_GE(reference.scratchBytes, scores);
  EXPECT_GE(reference.peakDeviceBytes, flash.peakDeviceBytes + scores);
  // Flash holds at most Split-K partials: per query row a few splits of head_dim floats, never per key.
  const std::uint64_t partialsPerRow = 64 * (c.headDim + 2) * 4;
  EXPECT_LE(flash.scratchBytes, std::uint64_t(c.run.batch) * c.nHeads * 192 * partialsPerRow);
  EXPECT_LT(flash.scratchBytes, scores / 4);
  EXPECT_EQ(reference.kernels.count("Causal_ReferenceScores__bottom_right_D64_f16"), 1u);
}

}  // namespace
}  // namespace foundry
