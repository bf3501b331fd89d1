// FlashAttentionStep against the CPU float64 reference over the shapes the kernels must serve, with
// the Selector's own choices (the forced variants are in AttentionVariantTest.cpp): q_len 1 to 128,
// kv_len off every tile size, kv_len = q_len and prefix continuation, GQA 1/4/8 and MQA, batch 1 and
// 3, head_dim 64 and 128, head-major and token-major Q and O, f16 and f32, extreme logits, and Q
// and K as strided views of a fused QKV buffer.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "foundry/Runtime.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

constexpr Layout HM = Layout::HeadMajor;
constexpr Layout TM = Layout::TokenMajor;

AttentionCase make(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t qLen,
                   std::uint32_t kvLen, std::uint32_t headDim, DType dtype, Layout q = HM, Layout o = HM) {
  return attentionCase(batch, heads, kvHeads, qLen, kvLen, headDim, dtype, q, o);
}

AttentionCase nonCausal(AttentionCase c) {
  c.causal = false;
  return c;
}

AttentionCase scaled(AttentionCase c, float magnitude) {
  c.magnitude = magnitude;
  return c;
}

std::string caseName(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name(); }

// ---- The three smoke tests: the first thing to look at when everything else fails.

TEST(AttentionSmoke, Decode) {
  const AttentionCase c = make(1, 4, 1, 1, 100, 64, DType::F16);
  EXPECT_TRUE(matchesReference(c, runFlash(c, AttentionOptions())));
}

TEST(AttentionSmoke, Prefill) {
  const AttentionCase c = make(1, 4, 2, 33, 40, 64, DType::F16);
  EXPECT_TRUE(matchesReference(c, runFlash(c, AttentionOptions())));
}

TEST(AttentionSmoke, Reference) {
  const AttentionCase c = make(1, 4, 2, 7, 40, 64, DType::F16);
  EXPECT_TRUE(matchesReference(c, runReference(c)));
}

// ---- Decode (q_len 1) with the Selector's choices.

class DecodeParity : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(DecodeParity, MatchesCpuReference) {
  const AttentionCase& c = GetParam();
  const AttentionResult r = runFlash(c, AttentionOptions());
  EXPECT_TRUE(r.record.plan.decode) << r.record.plan.describe();
  EXPECT_EQ(r.record.kernels.size(), 1u);  // Split-K decode merges in its last workgroup
  EXPECT_TRUE(matchesReference(c, r));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeParity,
    ::testing::Values(make(1, 4, 1, 1, 100, 64, DType::F16),            // MQA
                      make(1, 4, 4, 1, 33, 128, DType::F32, TM, HM),    // GQA 1
                      make(3, 8, 2, 1, 129, 128, DType::F16, TM, TM),   // GQA 4, batch 3
                      make(1, 8, 1, 1, 257, 64, DType::F32, HM, TM),    // GQA 8 (MQA)
                      make(3, 16, 2, 1, 77, 64, DType::F16),            // GQA 8, batch 3
                      make(1, 8, 2, 1, 45, 64, DType::F32),             // GQA 4
                      make(1, 2, 2, 1, 1, 64, DType::F32),              // kv_len = q_len = 1
                      make(2, 4, 1, 1, 3, 128, DType::F16, TM, TM)),    // fewer keys than a subgroup step
    caseName);

TEST(DecodeParityLong, SelectorSplitsLongKv) {
  // 3001 keys for one workgroup of 8 heads on a 2-CU device: the heuristic must split.
  const AttentionCase c = make(1, 8, 1, 1, 3001, 128, DType::F16);
  const AttentionResult r = runFlash(c, AttentionOptions());
  ASSERT_GT(r.record.plan.splits, 1u) << r.record.plan.describe();
  ASSERT_EQ(r.record.kernels.size(), 1u);
  EXPECT_NE(r.record.kernels[0].find("_split_merged"), std::string::npos) << r.record.kernels[0];
  EXPECT_TRUE(matchesReference(c, r));
}

TEST(DecodeParityLong, MergedSplitsStayCorrectCallAfterCall) {
  // The arrival counters are left at zero by each call's merging workgroups: calls with different
  // split counts and batch sizes, recorded back to back on one workspace and submitted together,
  // each merge exactly their own partials.
  const AttentionCase c = make(1, 8, 1, 1, 3001, 128, DType::F16);
  const AttentionCase batched = make(3, 8, 2, 1, 500, 64, DType::F16);
  std::vector<std::pair<AttentionCase, AttentionOptions>> calls;
  for (const std::uint32_t splits : {7u, 3u, 16u}) {
    AttentionOptions o;
    o.faDecodeSplitK = splits;
    o.faDecodeFusedReduce = Force::On;
    calls.emplace_back(c, o);
    calls.emplace_back(batched, o);
  }
  const auto results = runFlashSequence(calls);
  ASSERT_EQ(results.size(), calls.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(results[i].record.plan.describe());
    EXPECT_TRUE(results[i].record.plan.decodeVariant.fusedReduce);
    EXPECT_EQ(results[i].record.kernels.size(), 1u);
    EXPECT_TRUE(matchesReference(calls[i].first, results[i]));
  }
}

// ---- Prefill (q_len > 1) with the Selector's choices.

class PrefillParity : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(PrefillParity, MatchesCpuReference) {
  const AttentionCase& c = GetParam();
  const AttentionResult r = runFlash(c, AttentionOptions());
  EXPECT_FALSE(r.record.plan.decode) << r.record.plan.describe();
  EXPECT_EQ(r.record.kernels.size(), r.record.plan.splits > 1 ? 2u : 1u);
  EXPECT_TRUE(matchesReference(c, r));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillParity,
    ::testing::Values(make(1, 4, 1, 2, 2, 64, DType::F16),              // kv_len = q_len, MQA
                      make(1, 8, 2, 7, 45, 128, DType::F16, TM, TM),    // prefix of 38, GQA 4
                      make(3, 4, 4, 31, 31, 64, DType::F32),            // GQA 1, batch 3
                      make(1, 8, 1, 32, 100, 128, DType::F32, TM, TM),  // prefix of 68, GQA 8
                      make(1, 4, 1, 33, 33, 128, DType::F16, HM, TM),   // one row past a tile
                      make(3, 8, 1, 33, 70, 64, DType::F16, TM, HM),    // GQA 8, batch 3
                      make(1, 2, 2, 128, 128, 64, DType::F16),
                      make(1, 4, 1, 128, 300, 128, DType::F16),         // prefix of 172
                      make(1, 4, 2, 128, 203, 64, DType::F32, TM, TM),
                      make(3, 8, 2, 2, 19, 128, DType::F32),
                      nonCausal(make(1, 4, 1, 31, 75, 64, DType::F16)),
                      nonCausal(make(2, 4, 2, 7, 7, 128, DType::F32, TM, TM))),
    caseName);

// ---- Extreme logits: |scale * q.k| up to about 1e4. Everything must stay finite and still match.

class ExtremeLogits : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(ExtremeLogits, StayFiniteAndMatch) {
  const AttentionCase& c = GetParam();
  const AttentionResult r = runFlash(c, AttentionOptions());
  // The inputs really are extreme (else this test would prove nothing).
  EXPECT_GT(r.maxAbsLogit, 4e3) << c.name();
  EXPECT_LT(r.maxAbsLogit, 3e4) << c.name();
  EXPECT_TRUE(matchesReference(c, r));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ExtremeLogits,
    ::testing::Values(scaled(make(1, 4, 1, 1, 100, 64, DType::F16), 100.0f),
                      scaled(make(1, 4, 4, 1, 1001, 128, DType::F32, TM, TM), 100.0f),
                      scaled(make(1, 8, 2, 33, 77, 128, DType::F16), 100.0f),
                      scaled(make(2, 4, 1, 32, 90, 64, DType::F32, TM, HM), 100.0f)),
    caseName);

// ---- Q and K as strided views of one fused QKV projection [B, S, H + 2 Hkv, D] (token-major, not
// packed; K at an offset): RopeStep rotates the K view in place and leaves Q and V alone, then
// FlashAttentionStep reads the Q view through its strides.

class StridedViews : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(StridedViews, QueryAndKeyViewsOfFusedQkv) {
  const AttentionCase& c = GetParam();
  const AttentionProblem p = c.problem();
  ASSERT_EQ(c.qLayout, TM);
  Runtime& rt = runtime();
  const std::uint32_t width = p.nHeads + 2 * p.nKvHeads;
  const Tensor qkv = rt.allocate("qkv", c.dtype, {p.batch, p.qLen, width, p.headDim}, TM);
  const auto round = [&](std::vector<float> x) { return decodeElements(encodeElements(x, c.dtype), c.dtype); };
  const auto qkvIn = round(randomVector(qkv.numel(), c.seed));
  rt.upload(qkv, qkvIn);
  Tensor q = qkv;
  q.name = "q_view";
  q.dims = {p.batch, p.qLen, p.nHeads, p.headDim};
  Tensor k = qkv;
  k.name = "k_view";
  k.dims = {p.batch, p.qLen, p.nKvHeads, p.headDim};
  k.offset = std::uint64_t(p.nHeads) * p.headDim;
  AttentionCall call;
  call.q = q;
  call.k = rt.allocate("k_cache", c.dtype, p.kvDims(), Layout::KvCache);
  call.v = rt.allocate("v_cache", c.dtype, p.kvDims(), Layout::KvCache);
  call.o = rt.allocate("o", c.dtype, p.qDims(c.oLayout), c.oLayout);
  call.kvLen = p.kvLen;
  const auto kCache = round(randomVector(call.k.numel(), c.seed + 1));
  const auto vCache = round(randomVector(call.v.numel(), c.seed + 2));
  rt.upload(call.k, kCache);
  rt.upload(call.v, vCache);
  rt.poison(call.o);
  const RopeSpec rope;
  const std::uint32_t pos0 = p.queryOffset();
  const Tensor table = makeRopeTable(rt, rope, p.headDim);

  RopeStep ropeStep(rt.info(), rt.snippets());
  FlashAttentionStep step(rt.info(), rt.snippets(), AttentionOptions());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  ropeStep.run(ctx, k, table, rope, pos0);
  const StepRecord record = step.run(ctx, call);
  dispatcher->submit();

  // Attention: the Q view packed on the host.
  std::vector<float> qPacked(std::size_t(p.batch) * p.qLen * p.nHeads * p.headDim);
  const auto rowOf = [&](std::uint32_t b, std::uint32_t s, std::uint32_t w) {
    return ((std::size_t(b) * p.qLen + s) * width + w) * p.headDim;
  };
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    for (std::uint32_t s = 0; s < p.qLen; ++s) {
      for (std::uint32_t h = 0; h < p.nHeads; ++h) {
        std::copy_n(qkvIn.begin() + rowOf(b, s, h), p.headDim, qPacked.begin() + qIndex(p, TM, b, h, s));
      }
    }
  }
  AttentionResult r;
  r.record = record;
  r.got = rt.download(call.o);
  r.want = cpuAttention(p, qPacked, kCache, vCache);
  r.error = compareOutputs(r.got, r.want);
  EXPECT_TRUE(matchesReference(c, r));

  // RoPE: only the K rows of the QKV buffer moved, each at its own token's position.
  const auto qkvGot = rt.download(qkv);
  const double bound = c.dtype == DType::F32 ? 1e-5 : 4e-3;
  std::size_t bad = 0;
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    for (std::uint32_t s = 0; s < p.qLen; ++s) {
      for (std::uint32_t w = 0; w < width; ++w) {
        std::vector<float> want(qkvIn.begin() + rowOf(b, s, w), qkvIn.begin() + rowOf(b, s, w) + p.headDim);
        const bool isK = w >= p.nHeads && w < p.nHeads + p.nKvHeads;
        if (isK) cpuRope(rope, p.headDim, want, {pos0 + s});
        for (std::uint32_t d = 0; d < p.headDim; ++d) {
          const float got = qkvGot[rowOf(b, s, w) + d];
          bad += isK ? !(std::abs(double(got) - want[d]) <= bound) : got != want[d];
        }
      }
    }
  }
  EXPECT_EQ(bad, 0u) << "elements of the QKV buffer wrong after RopeStep on the K view";
}

INSTANTIATE_TEST_SUITE_P(Shapes, StridedViews,
                         ::testing::Values(make(2, 4, 2, 1, 40, 64, DType::F16, TM, TM),
                                           make(1, 8, 2, 9, 40, 128, DType::F32, TM, HM)),
                         caseName);

}  // namespace
}  // namespace foundry::test
