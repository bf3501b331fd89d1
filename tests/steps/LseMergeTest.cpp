// The log-sum-exp output of every decode and prefill variant against the CPU float64 reference, and
// MergeStep: attention over keys split into ranges (uneven, one part a row cannot see), each part
// with its LSE, merged back equal to the attention over all the keys. Outputs and LSEs are poisoned
// with NaN before every kernel writes them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "foundry/Runtime.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "foundry/stages/modifiers/MaskStage.h"
#include "foundry/steps/MergeStep.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

AttentionOptions knobs(std::initializer_list<std::pair<const char*, const char*>> env) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : env) m[k] = v;
  return AttentionOptions::fromEnvironment(m);
}

/// Every variant that writes an attention output: the decode subgroup and scalar kernels, Split-K
/// decode merged in its last workgroup or by a reduce kernel, prefill without and with Split-K.
std::vector<std::pair<std::string, AttentionOptions>> variants(bool decode) {
  if (decode) {
    return {{"subgroup", knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "1"}})},
            {"scalar", knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "1"}})},
            {"split_merged", knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}})},
            {"split_reduce", knobs({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}})},
            {"scalar_split", knobs({{"FOUNDRY_FA_DECODE_SCALAR", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "2"},
                                    {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}})}};
  }
  return {{"tiles", knobs({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}})},
          {"split", knobs({{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}})}};
}

AttentionCase lseCase(std::uint32_t qLen, std::uint32_t kvLen, DType dtype, std::vector<ModifierSpec> mods = {}) {
  AttentionCase c = attentionCase(2, 4, 2, qLen, kvLen, 64, dtype);  // GQA: two query heads per KV head
  c.lse = true;
  c.modifiers = std::move(mods);
  return c;
}

struct LseParam {
  AttentionCase shape;
  std::string variant;
  AttentionOptions options;
  bool rope = false;  ///< decode with RoPE fused in
};
void PrintTo(const LseParam& p, std::ostream* os) { *os << p.shape.name() << "__" << p.variant; }

std::vector<LseParam> lseParams() {
  std::vector<LseParam> out;
  for (const DType t : {DType::F16, DType::F32}) {
    for (const std::uint32_t qLen : {1u, 19u}) {
      // Plain; sinks (in the LSE's denominator); a mask that hides query row 0 entirely (-inf).
      const std::vector<std::vector<ModifierSpec>> modifierSets = {{}, {sinks({0.5, -1.0})}, {bitMask()}};
      for (const auto& mods : modifierSets) {
        // Decode with enough keys that a forced split survives every device's key granule (h200: 128).
        const std::uint32_t kvLen = qLen == 1 ? 777 : 77;
        for (const auto& [name, o] : variants(qLen == 1)) out.push_back({lseCase(qLen, kvLen, t, mods), name, o});
        // coopmat2 at subgroup scope (its epilogue writes the LSE from the staging area), f16 only, where
        // the device and a glslc have it; elsewhere the case skips.
        if (qLen > 1 && t == DType::F16) {
          out.push_back({lseCase(qLen, kvLen, t, mods), "coopmat2_sg",
                         knobs({{"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", "subgroup"},
                                {"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}})});
        }
      }
    }
    out.push_back({lseCase(1, 77, t), "rope", {}, true});
  }
  return out;
}

class LseParity : public ::testing::TestWithParam<LseParam> {};

TEST_P(LseParity, MatchesTheReference) {
  const LseParam& p = GetParam();
  if (p.options.faPrefillCoopMat2Subgroup && !runtime().info().coopMat2) {
    GTEST_SKIP() << "no GL_NV_cooperative_matrix2 here (the device, or a glslc for it: FOUNDRY_GLSLC)";
  }
  const AttentionResult r = runFlash(p.shape, p.options, p.rope ? std::optional<RopeSpec>(RopeSpec{}) : std::nullopt);
  EXPECT_TRUE(matchesReference(p.shape, r));
  // The variant asked for is the one that ran.
  if (p.shape.qLen == 1) {
    EXPECT_EQ(r.record.plan.splits > 1, p.variant.find("split") != std::string::npos);
  }
  bool hidden = false;
  for (double l : r.lseWant) hidden |= std::isinf(l);
  bool masked = false;
  for (const auto& m : p.shape.modifiers) masked |= m.kind == ModifierSpec::Kind::BitMask;
  EXPECT_EQ(hidden, masked) << "rows that see no key: only under the mask that hides row 0";
}

INSTANTIATE_TEST_SUITE_P(Variants, LseParity, ::testing::ValuesIn(lseParams()),
                         [](const ::testing::TestParamInfo<LseParam>& i) {
                           return i.param.shape.name() + "__" + i.param.variant;
                         });

// ---- merge --------------------------------------------------------------------------------------

/// Hides every key outside [lo, hi): the part of the keys one partial result covers.
ModifierSpec keyRange(std::uint32_t lo, std::uint32_t hi) {
  return custom(fmt::format("keys{}_{}", lo, hi), [lo, hi](Runtime& rt, const AttentionProblem& p) -> ModifierPtr {
    const std::uint32_t words = (p.kvLen + 31) / 32;
    std::vector<std::uint32_t> bits(std::size_t(p.qLen) * words, 0u);
    for (std::uint32_t i = 0; i < p.qLen; ++i) {
      for (std::uint32_t k = lo; k < hi; ++k) bits[i * words + k / 32] |= 1u << (k % 32);
    }
    const Tensor t = rt.allocate("key_range", DType::U32, {1, 1, p.qLen, words});
    rt.upload(t, std::span<const std::uint32_t>(bits));
    return MaskStage::bits(t, bits);
  });
}

struct MergeParam {
  AttentionCase shape;
  std::vector<std::uint32_t> cuts;  ///< part i covers keys [cuts[i], cuts[i + 1])
  std::string variant;
  AttentionOptions options;
};
std::string mergeName(const MergeParam& p) {
  return fmt::format("{}__{}parts__{}", p.shape.name(), p.cuts.size() - 1, p.variant);
}
void PrintTo(const MergeParam& p, std::ostream* os) { *os << mergeName(p); }

std::vector<MergeParam> mergeParams() {
  std::vector<MergeParam> out;
  // Prefill, causal: query rows sit at positions 58..76, so rows 0..11 see no key of [70, 77).
  // Decode under a 20-key window: the query sees keys 56..76 only, none of [0, 50) or [9, 40).
  for (const DType t : {DType::F16, DType::F32}) {
    for (const bool decode : {false, true}) {
      const std::vector<std::vector<std::uint32_t>> cuts = {
          {0, 77}, {0, decode ? 50u : 70u, 77}, {0, 5, 9, 40, 70, 77}};
      const AttentionCase shape = decode ? lseCase(1, 77, t, {window(20)}) : lseCase(19, 77, t);
      for (const auto& c : cuts) {
        for (const auto& [name, o] : variants(decode)) out.push_back({shape, c, name, o});
      }
    }
  }
  return out;
}

class Merge : public ::testing::TestWithParam<MergeParam> {};

/// Runs MergeStep on the device and waits.
MergeRecord runMerge(Runtime& rt, const MergeCall& call) {
  MergeStep step(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  const MergeRecord record = step.run(ctx, call);
  dispatcher->submit();
  return record;
}

TEST_P(Merge, PartsMergeToTheUnsplitResult) {
  const MergeParam& m = GetParam();
  const AttentionCase& c = m.shape;
  const AttentionResult whole = runFlash(c, m.options);
  ASSERT_TRUE(matchesReference(c, whole));
  Runtime& rt = runtime();
  const AttentionProblem p = c.problem();
  MergeCall call;
  bool unseen = false;  // some row sees no key of some part
  for (std::size_t i = 0; i + 1 < m.cuts.size(); ++i) {
    AttentionCase part = c;
    part.modifiers.push_back(keyRange(m.cuts[i], m.cuts[i + 1]));
    const AttentionResult r = runFlash(part, m.options);
    ASSERT_TRUE(matchesReference(part, r)) << "part " << i;
    for (double l : r.lseWant) unseen |= std::isinf(l);
    MergePart mp{rt.allocate(fmt::format("part{}_o", i), c.dtype, p.oDims(c.oLayout), c.oLayout),
                 rt.allocate(fmt::format("part{}_lse", i), DType::F32, p.lseDims())};
    rt.upload(mp.o, r.got);
    rt.upload(mp.lse, r.lseGot);
    call.parts.push_back(mp);
  }
  EXPECT_EQ(unseen, m.cuts.size() > 2) << "every split has a part some row cannot see";
  call.o = rt.allocate("merged_o", c.dtype, p.oDims(c.oLayout), c.oLayout);
  call.lse = rt.allocate("merged_lse", DType::F32, p.lseDims());
  rt.poison(call.o);
  rt.poison(*call.lse);
  const MergeRecord record = runMerge(rt, call);
  EXPECT_EQ(record.kernels.size(), 1u);
  const std::vector<float> got = rt.download(call.o);
  const ErrorStats e = compareOutputs(got, whole.want);
  EXPECT_EQ(e.nonFinite, 0u);
  EXPECT_LE(e.maxRel, relativeBound(c, whole)) << "merged vs unsplit reference: max-abs " << e.maxAbs << " at "
                                               << e.worstIndex;
  EXPECT_EQ(lseMismatch(rt.download(*call.lse), whole.lseWant, lseBound(c, whole)), "");
}

INSTANTIATE_TEST_SUITE_P(KeyRanges, Merge, ::testing::ValuesIn(mergeParams()),
                         [](const ::testing::TestParamInfo<MergeParam>& i) { return mergeName(i.param); });

// More query rows than a grid dimension holds (65535): the rows past it continue in z. Two parts of
// random outputs and LSEs (one row's part -inf) merged against the float64 formula, every row.
TEST(MergeLongRows, RowsPastTheGridLimitMerge) {
  Runtime& rt = runtime();
  const std::uint32_t batch = 2, heads = 1, rows = 70001, dim = 16;
  const std::vector<std::int64_t> oDims{batch, heads, rows, dim}, lseDims{batch, heads, rows};
  MergeCall call;
  std::vector<std::vector<float>> o, lse;
  for (std::uint32_t i = 0; i < 2; ++i) {
    o.push_back(randomVector(std::size_t(batch) * rows * dim, 40 + i));
    lse.push_back(randomVector(std::size_t(batch) * rows, 50 + i, -3.0f, 3.0f));
    call.parts.push_back({rt.allocate(fmt::format("long_o{}", i), DType::F32, oDims, Layout::HeadMajor),
                          rt.allocate(fmt::format("long_lse{}", i), DType::F32, lseDims)});
  }
  lse[1][rows + 65535 + 3] = -std::numeric_limits<float>::infinity();  // batch 1, row 65538: part 0 only
  for (std::uint32_t i = 0; i < 2; ++i) {
    rt.upload(call.parts[i].o, o[i]);
    rt.upload(call.parts[i].lse, lse[i]);
  }
  call.o = rt.allocate("long_merged", DType::F32, oDims, Layout::HeadMajor);
  call.lse = rt.allocate("long_merged_lse", DType::F32, lseDims);
  rt.poison(call.o);
  rt.poison(*call.lse);
  const MergeRecord record = runMerge(rt, call);
  ASSERT_EQ(record.grids.size(), 1u);
  EXPECT_EQ(record.grids[0], (Grid{65535, heads, batch * 2}));
  std::vector<double> want(o[0].size()), lseWant(lse[0].size());
  for (std::size_t r = 0; r < lseWant.size(); ++r) {
    const double m = std::max<double>(lse[0][r], lse[1][r]);
    const double w0 = std::exp(double(lse[0][r]) - m), w1 = std::exp(double(lse[1][r]) - m);
    lseWant[r] = m + std::log(w0 + w1);
    for (std::uint32_t d = 0; d < dim; ++d) {
      want[r * dim + d] = (w0 * o[0][r * dim + d] + w1 * o[1][r * dim + d]) / (w0 + w1);
    }
  }
  const ErrorStats e = compareOutputs(rt.download(call.o), want);
  EXPECT_EQ(e.nonFinite, 0u);
  EXPECT_LE(e.maxRel, 1e-5) << "worst at " << e.worstIndex;
  const ErrorStats el = compareOutputs(rt.download(*call.lse), lseWant);
  EXPECT_LE(el.maxAbs, 1e-4) << "worst LSE at " << el.worstIndex;
}

}  // namespace
}  // namespace foundry::test
