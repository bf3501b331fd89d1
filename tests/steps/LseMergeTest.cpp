// The log-sum-exp output of every decode and prefill variant against the CPU float64 reference, and
// MergeStep: attention over keys split into ranges (uneven, one part a row cannot see), each part
// with its LSE, merged back equal to the attention over all the keys. Outputs and LSEs are poisoned
// with NaN before every kernel writes them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
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

// Two parts of random f32 outputs and LSEs in [-3, 3], [batch, 1, rows, dim], that `edit` may change
// before they are uploaded, with a poisoned merged output and LSE: the merges of values a test gives.
struct TwoParts {
  std::uint32_t batch, rows, dim;
  std::vector<std::vector<float>> o, lse;
  MergeCall call;
};
TwoParts twoParts(const std::string& name, std::uint32_t batch, std::uint32_t rows, std::uint32_t dim,
                  std::uint32_t seed, const std::function<void(TwoParts&)>& edit) {
  Runtime& rt = runtime();
  TwoParts t{batch, rows, dim, {}, {}, {}};
  const std::vector<std::int64_t> oDims{batch, 1, rows, dim}, lseDims{batch, 1, rows};
  for (std::uint32_t i = 0; i < 2; ++i) {
    t.o.push_back(randomVector(std::size_t(batch) * rows * dim, seed + i));
    t.lse.push_back(randomVector(std::size_t(batch) * rows, seed + 10 + i, -3.0f, 3.0f));
    t.call.parts.push_back({rt.allocate(fmt::format("{}_o{}", name, i), DType::F32, oDims, Layout::HeadMajor),
                            rt.allocate(fmt::format("{}_lse{}", name, i), DType::F32, lseDims)});
  }
  edit(t);
  for (std::uint32_t i = 0; i < 2; ++i) {
    rt.upload(t.call.parts[i].o, t.o[i]);
    rt.upload(t.call.parts[i].lse, t.lse[i]);
  }
  t.call.o = rt.allocate(name + "_merged", DType::F32, oDims, Layout::HeadMajor);
  t.call.lse = rt.allocate(name + "_merged_lse", DType::F32, lseDims);
  rt.poison(t.call.o);
  rt.poison(*t.call.lse);
  return t;
}

// The float64 merge of two parts: the outputs, then the LSEs.
std::pair<std::vector<double>, std::vector<double>> mergedInFloat64(const TwoParts& t) {
  std::vector<double> want(t.o[0].size()), lseWant(t.lse[0].size());
  for (std::size_t r = 0; r < lseWant.size(); ++r) {
    const double m = std::max<double>(t.lse[0][r], t.lse[1][r]);
    const double w0 = std::exp(double(t.lse[0][r]) - m), w1 = std::exp(double(t.lse[1][r]) - m);
    lseWant[r] = m + std::log(w0 + w1);
    for (std::uint32_t d = 0; d < t.dim; ++d) {
      want[r * t.dim + d] = (w0 * t.o[0][r * t.dim + d] + w1 * t.o[1][r * t.dim + d]) / (w0 + w1);
    }
  }
  return {want, lseWant};
}

// More query rows than a grid dimension holds (65535): the rows past it continue in z. Two parts of
// random outputs and LSEs (one row's part -inf) merged against the float64 formula, every row.
TEST(MergeLongRows, RowsPastTheGridLimitMerge) {
  const std::uint32_t rows = 70001;
  TwoParts t = twoParts("long", 2, rows, 16, 40, [&](TwoParts& p) {
    p.lse[1][rows + 65535 + 3] = -std::numeric_limits<float>::infinity();  // batch 1, row 65538: part 0 only
  });
  Runtime& rt = runtime();
  const MergeRecord record = runMerge(rt, t.call);
  ASSERT_EQ(record.grids.size(), 1u);
  EXPECT_EQ(record.grids[0], (Grid{65535, 1, 2 * 2}));
  const auto [want, lseWant] = mergedInFloat64(t);
  const ErrorStats e = compareOutputs(rt.download(t.call.o), want);
  EXPECT_EQ(e.nonFinite, 0u);
  EXPECT_LE(e.maxRel, 1e-5) << "worst at " << e.worstIndex;
  const ErrorStats el = compareOutputs(rt.download(*t.call.lse), lseWant);
  EXPECT_LE(el.maxAbs, 1e-4) << "worst LSE at " << el.worstIndex;
}

// LSEs far from 0 (a long context's, or a caller's own offset): parts whose LSEs differ by up to 6 near
// +-1e6, and a row whose parts both have the finite LSE -3e38, merge as the float64 formula does.
TEST(MergeLargeLse, PartsFarFromZeroMergeByTheirDifferences) {
  const std::uint32_t rows = 64;
  TwoParts t = twoParts("far", 1, rows, 16, 80, [&](TwoParts& p) {
    for (auto& lse : p.lse) {
      for (std::uint32_t r = 0; r < rows; ++r) lse[r] += r % 2 ? 1e6f : -1e6f;
      lse[rows - 1] = -3e38f;
    }
  });
  Runtime& rt = runtime();
  runMerge(rt, t.call);
  const auto [want, lseWant] = mergedInFloat64(t);
  const ErrorStats e = compareOutputs(rt.download(t.call.o), want);
  EXPECT_EQ(e.nonFinite, 0u);
  EXPECT_LE(e.maxRel, 1e-5) << "worst at " << e.worstIndex;
  const std::vector<float> gotLse = rt.download(*t.call.lse);
  for (std::uint32_t r = 0; r < rows; ++r) {
    EXPECT_NEAR(gotLse[r], lseWant[r], std::abs(lseWant[r]) * 2e-7 + 1e-5) << "row " << r;
  }
}

// A NaN in a part reaches what it weighs into, as in PyTorch: a NaN LSE makes its row NaN (every element
// and the merged LSE), a NaN output element makes that element NaN; a part with LSE -inf weighs nothing.
TEST(MergeNonFinite, ANaNPartReachesOnlyWhatItWeighsInto) {
  const std::uint32_t rows = 6, dim = 16;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  TwoParts t = twoParts("nf", 1, rows, dim, 60, [&](TwoParts& p) {
    p.lse[1][1] = nan;          // row 1: NaN everywhere
    p.o[0][2 * dim + 5] = nan;  // row 2: element 5 NaN
    p.lse[1][3] = -inf;         // row 3: part 0 alone
    std::fill_n(p.o[1].begin() + 3 * dim, dim, 0.0f);
  });
  Runtime& rt = runtime();
  runMerge(rt, t.call);
  const std::vector<float> got = rt.download(t.call.o), gotLse = rt.download(*t.call.lse);
  for (std::uint32_t r = 0; r < rows; ++r) {
    EXPECT_EQ(std::isnan(gotLse[r]), r == 1) << "row " << r << " LSE " << gotLse[r];
    for (std::uint32_t d = 0; d < dim; ++d) {
      const float x = got[r * dim + d];
      EXPECT_EQ(std::isnan(x), r == 1 || (r == 2 && d == 5)) << "row " << r << " element " << d << " = " << x;
      if (r == 3) {
        EXPECT_NEAR(x, t.o[0][r * dim + d], 1e-6) << "row 3 is part 0's: part 1 saw nothing";
      }
    }
  }
}

}  // namespace
}  // namespace foundry::test
