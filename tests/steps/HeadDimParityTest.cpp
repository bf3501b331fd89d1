// Every head dim the kernels serve, run on the default device against the CPU float64 reference on
// fresh random inputs with NaN-poisoned outputs: decode (subgroup, scalar, Split-K, fused RoPE) and
// prefill (subgroup, Split-K; cooperative matrices where the device has them and the dim is a
// multiple of 16), f16 and f32, with GQA (which variants at which dims: cases() below). Dims that
// are not a multiple of the subgroup size leave the last lanes of the subgroup prefill a partial
// slice of the row; tiles narrower than the subgroup leave its last lanes without a key; the lanes
// of a decode key cluster split the row into slices of 2 to 20 elements.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/steps/TuningTable.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct DimCase {
  AttentionCase shape;
  AttentionOptions options;
  std::string variant;
  bool rope = false;
  bool coopMat = false;
  bool reference = false;  ///< SdpaReferenceStep instead of FlashAttentionStep
  /// Tail words as the H200 splits the row: a narrower subgroup may have no such split (D160's 16
  /// lanes of 10 on lavapipe's 8), and the knob is then refused; the bench checks it on the H200.
  bool tailWords = false;
  std::string name() const { return shape.name() + "__" + variant; }
};

void PrintTo(const DimCase& c, std::ostream* os) { *os << c.name(); }

AttentionOptions knobs(std::initializer_list<std::pair<std::string, std::string>> env, bool coop = false) {
  std::map<std::string, std::string> m(env.begin(), env.end());
  m.emplace("FOUNDRY_FA_PREFILL_COOPMAT", coop ? "1" : "0");
  return AttentionOptions::fromEnvironment(m);
}

// Every dim in f16 through the default decode and prefill; three dims (a tail past the subgroup
// size, a non-power of two, the widest) through every other variant and f32.
std::vector<DimCase> cases() {
  std::vector<DimCase> out;
  std::uint32_t seed = 1;
  for (const std::uint32_t d : {32u, 40u, 72u, 80u, 96u, 112u, 160u, 192u, 256u}) {
    const bool every = d == 40 || d == 96 || d == 256;
    for (const DType t : {DType::F16, DType::F32}) {
      if (t == DType::F32 && !every) continue;
      AttentionCase dec = attentionCase(2, 8, 2, 1, 137, d, t);
      dec.seed = seed++;
      out.push_back({dec, knobs({}), "decode"});
      AttentionCase pre = attentionCase(1, 4, 2, 29, 61, d, t);
      pre.seed = seed++;
      out.push_back({pre, knobs({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}), "prefill"});
      if (t == DType::F16 && d % 16 == 0) {
        out.push_back({pre, knobs({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}, true), "prefill_coopmat", false, true});
        out.push_back({pre, knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}, true), "prefill_coopmat_splitk2", false, true});
      }
      if (!every || t == DType::F32) continue;
      out.push_back({dec, knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}), "decode_scalar"});
      out.push_back({dec, knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}),
                     "decode_splitk3"});
      out.push_back({dec, knobs({}), "decode_rope", /*rope=*/true});
      out.push_back({pre, knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}), "prefill_splitk2"});
    }
    if (d == 96 || d == 256) {
      // Tiles of 4 keys, narrower than any subgroup: where wide f32 rows leave no room for more.
      for (const DType t : {DType::F16, DType::F32}) {
        AttentionCase pre = attentionCase(1, 4, 2, 29, 61, d, t);
        pre.seed = seed++;
        out.push_back({pre, knobs({{"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "4"}, {"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}),
                       "prefill_4key_tiles_splitk2"});
      }
    }
  }
  // Tail words at every dim where the tuning table gives them to the H200's 16-bit rows, with the
  // merged Split-K of long caches.
  for (std::uint32_t d = 32; d <= 256; d += 8) {
    if (tuningFor(devicePreset("h200"), d, DType::F16).decodeTailWords == 0) continue;
    AttentionCase dec = attentionCase(2, 8, 2, 1, 137, d, DType::F16);
    dec.seed = seed++;
    DimCase c{dec,
              knobs({{"FOUNDRY_FA_DECODE_TAIL_WORDS", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                     {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}}),
              "decode_tail_words_splitk3_merged"};
    c.tailWords = true;
    out.push_back(c);
  }
  // Wider than any model's heads here (DeepSeek's latent rows are): the scalar decode keeps eight
  // heads' outputs of 320 dims, 80 per invocation, in its shared-memory partial.
  AttentionCase wide = attentionCase(1, 8, 1, 1, 77, 320, DType::F16);
  wide.seed = seed++;
  out.push_back({wide, knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}), "decode_scalar"});
  // Value rows narrower than key rows, in decode: DeepSeek-V2's 192/128 with its own V cache, and
  // its absorbed MLA decode, every query head against one latent row of 576 whose leading 512
  // columns are the values, read in place. The materialised path takes both, prefill included.
  for (const DType t : {DType::F16, DType::F32}) {
    AttentionCase dec = attentionCase(2, 8, 2, 1, 137, 192, t);
    dec.valueDim = 128;
    dec.seed = seed++;
    AttentionCase mla = attentionCase(1, 16, 1, 1, 137, 576, t);
    mla.valueDim = 512;
    mla.valuesInKeys = true;
    mla.seed = seed++;
    for (const AttentionCase& c : {dec, mla}) {
      out.push_back({c, knobs({}), "decode"});
      out.push_back({c, knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}), "decode_scalar"});
      out.push_back({c, knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}),
                     "decode_splitk3"});
      out.push_back({c, knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}}),
                     "decode_splitk3_merged"});
      out.push_back({c, knobs({}), "reference", false, false, true});
    }
    AttentionCase pre = attentionCase(1, 4, 2, 29, 61, 192, t);
    pre.valueDim = 128;
    pre.seed = seed++;
    out.push_back({pre, knobs({}), "reference", false, false, true});
  }
  return out;
}

class HeadDims : public ::testing::TestWithParam<DimCase> {};

TEST_P(HeadDims, MatchTheCpuReference) {
  const DimCase& c = GetParam();
  if (c.coopMat && !runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    GTEST_SKIP() << "the device has no cooperative matrices";
  }
  AttentionResult r;
  try {
    r = c.reference ? runReference(c.shape)
        : c.rope    ? runFlash(c.shape, c.options, RopeSpec{})
                    : runFlash(c.shape, c.options);
  } catch (const UserError& e) {
    if (!c.tailWords || std::string_view(e.what()).find("FOUNDRY_FA_DECODE_TAIL_WORDS") == std::string_view::npos)
      throw;
    GTEST_SKIP() << e.what();
  }
  EXPECT_TRUE(matchesReference(c.shape, r)) << r.record.plan.describe();
  if (c.reference) return;
  EXPECT_EQ(r.record.plan.decode ? r.record.plan.decodeVariant.headDim : r.record.plan.prefillVariant.headDim,
            c.shape.headDim);
  if (c.shape.valueDim) {
    EXPECT_EQ(r.record.plan.decodeVariant.vDim(), c.shape.valueDim);
  }
}

std::string caseName(const ::testing::TestParamInfo<DimCase>& info) { return info.param.name(); }

INSTANTIATE_TEST_SUITE_P(Every, HeadDims, ::testing::ValuesIn(cases()), caseName);

}  // namespace
}  // namespace foundry::test
