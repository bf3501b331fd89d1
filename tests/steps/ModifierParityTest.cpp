// Every built-in modifier in every kernel variant, against the CPU float64 reference (its own C++ of
// each modifier), on fresh random inputs with NaN-poisoned outputs and NaN in every cache row a
// sequence does not hold. Four modifier sets together cover every built-in, and each runs through
// every forced variant: decode (subgroup, scalar, Split-K merged by a reduce kernel and by the last
// workgroup, 16-byte loads, fused RoPE), prefill (subgroup, Split-K; cooperative matrices with the
// register and the shared-memory softmax, and Split-K, where the device has them) and the
// materialised reference path. Then the edges: windows smaller than a tile and larger than the
// cache, fully masked rows (0, never NaN), soft-caps of logits near 1e4, sinks far below and above
// every logit, ALiBi over 8 and 12 heads.
#include <cmath>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/stages/modifiers/AlibiStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

enum class Path { Flash, FusedRope, Reference };

struct ModCase {
  AttentionCase shape;
  AttentionOptions options;
  std::string variant;  ///< for the name
  Path path = Path::Flash;
  bool coopMat = false;  ///< needs cooperative matrices (skipped without them)
  std::string name() const { return shape.name() + "__" + variant; }
};

void PrintTo(const ModCase& c, std::ostream* os) { *os << c.name(); }

AttentionOptions knobs(std::initializer_list<std::pair<std::string, std::string>> env) {
  std::map<std::string, std::string> m(env.begin(), env.end());
  m.emplace("FOUNDRY_FA_PREFILL_COOPMAT", "0");
  return AttentionOptions::fromEnvironment(m);
}

// Decode: batch 3 with GQA groups of 4; prefill: batch 2, MQA (4 heads, one KV head).
AttentionCase decodeShape() { return attentionCase(3, 8, 2, 1, 150, 64, DType::F16); }
AttentionCase prefillShape() { return attentionCase(2, 4, 1, 37, 90, 64, DType::F16); }

// Four sets that together hold every built-in; each names the shape it needs.
std::vector<AttentionCase> modifierSets(const AttentionCase& base, bool decode) {
  std::vector<AttentionCase> out;
  AttentionCase a = base;  // gpt-oss / Gemma 2: a causal window, a soft-cap, sinks of every sign
  a.modifiers = {window(decode ? 40 : 20), softCap(20.0), sinks({-1e4, 0.5, 3.0, -2.0})};
  out.push_back(a);
  AttentionCase b = base;  // BLOOM / MPT with sequences of different lengths
  b.modifiers = {alibi(), keyLengths(decode ? std::vector<std::uint32_t>{150, 97, 40} : std::vector<std::uint32_t>{90, 61})};
  out.push_back(b);
  AttentionCase c = base;  // PyTorch's top-left is_causal with an additive mask
  c.causal = false;
  c.modifiers = {topLeftCausal(), additiveMask()};
  out.push_back(c);
  AttentionCase d = base;  // a broadcast bit mask with a window that also looks ahead
  d.causal = false;
  d.modifiers = {bitMask(/*broadcast=*/true), window(9, 5)};
  out.push_back(d);
  for (auto& x : out) x.seed += 17 * static_cast<std::uint32_t>(&x - &out[0]) + 1;
  return out;
}

std::vector<ModCase> everyVariant() {
  std::vector<ModCase> out;
  const std::vector<std::pair<std::string, AttentionOptions>> decodeKnobs = {
      {"subgroup", knobs({})},
      {"scalar", knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}})},
      {"splitk3_reduce", knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}})},
      {"splitk4_merged", knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}})},
      {"vec8_u8", knobs({{"FOUNDRY_FA_DECODE_VEC", "8"}, {"FOUNDRY_FA_DECODE_UNROLL", "8"}})},
      // Scores scattered: masks and score changes on the lane that weighs each score (steps enough
      // for the lanes of a key on subgroups of 8 to 32).
      {"scatter_k1_u8", knobs({{"FOUNDRY_FA_DECODE_SCATTER", "1"}, {"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "1"},
                               {"FOUNDRY_FA_DECODE_UNROLL", "8"}})},
      {"scatter_k2_u4_splitk3", knobs({{"FOUNDRY_FA_DECODE_SCATTER", "1"}, {"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "2"},
                                       {"FOUNDRY_FA_DECODE_UNROLL", "4"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})},
  };
  for (const auto& set : modifierSets(decodeShape(), true)) {
    for (const auto& [name, o] : decodeKnobs) out.push_back({set, o, "decode_" + name});
    out.push_back({set, knobs({}), "decode_rope", Path::FusedRope});
    out.push_back({set, knobs({}), "reference", Path::Reference});
  }
  const std::vector<std::tuple<std::string, AttentionOptions, bool>> prefillKnobs = {
      {"subgroup", knobs({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}), false},
      {"splitk3", knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}), false},
      {"coopmat", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}, {"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}), true},
      {"coopmat_shared", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"},
                                                          {"FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX", "0"},
                                                          {"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}), true},
      {"coopmat_splitk2", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"},
                                                           {"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}), true},
  };
  for (const auto& set : modifierSets(prefillShape(), false)) {
    for (const auto& [name, o, coop] : prefillKnobs) out.push_back({set, o, "prefill_" + name, Path::Flash, coop});
    out.push_back({set, knobs({}), "reference", Path::Reference});
  }
  return out;
}

std::string caseName(const ::testing::TestParamInfo<ModCase>& info) { return info.param.name(); }

bool hasCoopMat() { return runtime().info().hasCoopMat({16, 16, 16, DType::F16, DType::F32}); }

AttentionResult runCase(const ModCase& c) {
  switch (c.path) {
    case Path::Reference: return runReference(c.shape);
    case Path::FusedRope: return runFlash(c.shape, c.options, RopeSpec{});
    case Path::Flash: break;
  }
  return runFlash(c.shape, c.options);
}

class ModifierVariants : public ::testing::TestWithParam<ModCase> {};

TEST_P(ModifierVariants, MatchesTheCpuReference) {
  const ModCase& c = GetParam();
  if (c.coopMat && !hasCoopMat()) GTEST_SKIP() << "the device has no cooperative matrices";
  const AttentionResult r = runCase(c);
  EXPECT_TRUE(matchesReference(c.shape, r));
  // What ran is what was asked for: every modifier is in the kernels' chain.
  EXPECT_EQ(r.record.modifiers.size(), c.shape.modifiers.size() + (c.shape.causal && c.shape.qLen > 1 ? 1 : 0))
      << r.record.plan.describe();
  // A forced split divides the visible keys (top-left causal at one query leaves one key to see).
  if (c.path == Path::Flash && c.variant.find("splitk") != std::string::npos && r.record.plan.visibleKeys >= 64) {
    EXPECT_GT(r.record.plan.splits, 1u) << r.record.plan.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Every, ModifierVariants, ::testing::ValuesIn(everyVariant()), caseName);

// ---- edges --------------------------------------------------------------------------------------

std::vector<ModCase> edges() {
  std::vector<ModCase> out;
  auto add = [&](AttentionCase c, std::string variant, AttentionOptions o = knobs({})) {
    out.push_back({std::move(c), std::move(o), std::move(variant)});
  };
  // Windows smaller than one key tile (lavapipe's tiles hold 16 keys, the H200's 64) and larger than
  // the whole cache.
  AttentionCase w = attentionCase(1, 4, 2, 33, 70, 64, DType::F16);
  w.modifiers = {window(2)};
  add(w, "window_below_a_tile");
  w.modifiers = {window(5000)};
  add(w, "window_beyond_the_cache");
  AttentionCase wd = attentionCase(1, 8, 8, 1, 300, 64, DType::F32);
  wd.modifiers = {window(0)};
  add(wd, "decode_window_one_key");
  wd.modifiers = {window(SlidingWindowStage::kMaxExtent, SlidingWindowStage::kMaxExtent)};
  add(wd, "decode_window_unbounded");
  // A window with causal and Split-K: splits divide the window's keys, not the cache's.
  AttentionCase ws = attentionCase(1, 4, 4, 1, 2000, 64, DType::F16);
  ws.modifiers = {window(300)};
  add(ws, "decode_window_splitk", knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}));
  AttentionCase wp = attentionCase(1, 2, 1, 24, 400, 64, DType::F16);
  wp.modifiers = {window(50)};
  add(wp, "prefill_window_splitk", knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "4"}}));
  // Fully masked rows: the drawn masks hide query row 0 entirely; with sinks the row still gives 0.
  AttentionCase m = attentionCase(1, 4, 2, 9, 40, 64, DType::F32);
  m.causal = false;
  m.modifiers = {bitMask(), sinks({2.0, -1.0})};
  add(m, "masked_rows_with_sinks");
  m.modifiers = {additiveMask(false, DType::F32)};
  add(m, "masked_rows_f32_mask");
  // Soft-cap of logits near +-1e4 (q and k up to 60 in magnitude, head_dim 64).
  AttentionCase s = attentionCase(1, 4, 1, 17, 60, 64, DType::F32);
  s.magnitude = 60.0f;
  s.modifiers = {softCap(50.0)};
  add(s, "softcap_logits_near_1e4");
  AttentionCase sd = s;
  sd.qLen = 1;
  add(sd, "decode_softcap_logits_near_1e4");
  // Caps far above every logit (tanh near 0, where cap - 2 cap / (e^2x + 1) cancels: at a cap of 1e8 it
  // gave every logit 0), in f32, whose bound is 1e-4.
  for (const double cap : {1e4, 1e8}) {
    AttentionCase big = attentionCase(1, 4, 1, 17, 60, 64, DType::F32);
    big.magnitude = 3.0f;
    big.modifiers = {softCap(cap)};
    add(big, fmt::format("softcap_1e{}", int(std::log10(cap))));
    big.qLen = 1;
    add(big, fmt::format("decode_softcap_1e{}", int(std::log10(cap))));
  }
  // Sinks far below and far above every logit, and in between.
  AttentionCase k = attentionCase(2, 6, 2, 1, 120, 64, DType::F16);
  k.modifiers = {sinks({-1e4, 1e4, -30.0, 30.0, 0.0, 2.5})};
  add(k, "decode_sinks_extremes");
  add(k, "decode_sinks_extremes_scalar", knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}));
  AttentionCase kp = k;
  kp.qLen = 21;
  add(kp, "prefill_sinks_extremes");
  // ALiBi with a power-of-two head count and with 12 heads (BLOOM's interleaved extra slopes).
  AttentionCase a8 = attentionCase(1, 8, 2, 25, 64, 64, DType::F16);
  a8.modifiers = {alibi()};
  add(a8, "alibi_8_heads");
  AttentionCase a12 = attentionCase(1, 12, 4, 1, 200, 64, DType::F32);
  a12.modifiers = {alibi()};
  add(a12, "decode_alibi_12_heads");
  a12.qLen = 19;
  add(a12, "alibi_12_heads");
  AttentionCase ag = a12;
  ag.modifiers = {alibi({0.5, 0.25, 0.125})};
  add(ag, "alibi_given_slopes");
  // A distance bias with a score hook listed before it: the bias comes first all the same (a cap of
  // 5 against distances up to 80 tells the two orders apart).
  AttentionCase as = attentionCase(1, 8, 2, 23, 80, 64, DType::F32);
  as.modifiers = {softCap(5.0), alibi()};
  add(as, "softcap_then_alibi");
  as.qLen = 1;
  add(as, "decode_softcap_then_alibi");
  return out;
}

class ModifierEdges : public ::testing::TestWithParam<ModCase> {};

TEST_P(ModifierEdges, MatchesTheCpuReference) {
  const ModCase& c = GetParam();
  const AttentionResult r = runCase(c);
  EXPECT_TRUE(matchesReference(c.shape, r));
}

std::string edgeName(const ::testing::TestParamInfo<ModCase>& info) { return info.param.variant; }

INSTANTIATE_TEST_SUITE_P(Edges, ModifierEdges, ::testing::ValuesIn(edges()), edgeName);

TEST(ModifierEdgeFacts, TheDistanceBiasPrecedesEveryScoreHook) {
  PerHeadValues slopes;
  slopes.values = {0.5};
  const Modifiers list = {std::make_shared<SoftCapStage>(5.0), std::make_shared<AlibiStage>(slopes)};
  const HookAt at{.b = 0, .h = 0, .q = 90, .k = 10, .offset = 0};
  EXPECT_NEAR(ModifierChain{list}.score(1.0, at), 5.0 * std::tanh((1.0 - 40.0) / 5.0), 1e-12);
}

TEST(ModifierEdgeFacts, FullyMaskedRowsAreZeroNotNaN) {
  AttentionCase m = attentionCase(1, 4, 2, 9, 40, 64, DType::F32);
  m.causal = false;
  m.modifiers = {bitMask(), sinks({2.0, -1.0})};
  const AttentionResult r = runFlash(m, knobs({}));
  // Row 0 of every head is hidden by the drawn mask.
  const AttentionProblem p = m.problem();
  for (std::uint32_t h = 0; h < p.nHeads; ++h) {
    for (std::uint32_t d = 0; d < p.headDim; ++d) {
      const float x = r.got[qIndex(p, p.oLayout, 0, h, 0) + d];
      ASSERT_EQ(x, 0.0f) << "head " << h << " dim " << d;
    }
  }
}

TEST(ModifierEdgeFacts, WindowedDecodeSplitsTheWindowNotTheCache) {
  AttentionCase ws = attentionCase(1, 4, 4, 1, 2000, 64, DType::F16);
  ws.modifiers = {window(300)};
  const AttentionResult r = runFlash(ws, knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}}));
  EXPECT_EQ(r.record.plan.visibleKeys, 301u);
  EXPECT_LE(r.record.plan.kvChunk * r.record.plan.splits, 301u + r.record.plan.decodeVariant.keyGranule(
                                                                      runtime().info().subgroupSize) * 3);
  EXPECT_TRUE(matchesReference(ws, r));
}

}  // namespace
}  // namespace foundry::test
