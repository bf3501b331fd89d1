// FusedAttention, the API a program holds, on the device against the CPU float64 reference: a fused
// RoPE -> decode chain with a user modifier whose GLSL is a file, planned once and run for several
// positions and inputs; a shape for which the Selector picks Split-K on its own; a prefill with a
// user modifier given as a string; and a prepared plan refusing a call of other shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/GlslSource.h"
#include "foundry/Random.h"
#include "foundry/Runtime.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FusedAttention.h"
#include "foundry/steps/Selector.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/testing/Mocks.h"
#include "foundry/testing/ShapeCall.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// Every logit divided by a temperature, with its GLSL brought as a GlslSource (a file or a string).
class TemperatureStage : public AttentionModifier {
 public:
  TemperatureStage(GlslSource glsl, float temperature) : glsl_(std::move(glsl)), t_(temperature) {}
  std::string name() const override { return "TemperatureStage"; }
  std::string key() const override { return glsl_.name; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.push("user_temperature", PushType::F32).snippet(glsl_).hook(hook::kScore, "user_temperature_score");
  }
  void bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const override {
    args.set("user_temperature", t_);
  }
  double score(double s, const HookAt&) const override { return s / t_; }

 private:
  GlslSource glsl_;
  float t_;
};

GlslSource temperatureFile() { return GlslSource::fromFile(FOUNDRY_SOURCE_DIR "/tests/steps/glsl/temperature.glsl"); }

/// Q, K and V of one call on the device, with the values the device holds (rounded to the dtype).
struct Inputs {
  AttentionCall call;
  std::vector<float> q, k, v;
};

Inputs upload(Runtime& rt, const AttentionProblem& p, std::uint32_t seed) {
  Inputs in;
  in.call.q = rt.allocate("q", p.dtype, p.qDims(Layout::HeadMajor), Layout::HeadMajor);
  in.call.o = rt.allocate("o", p.dtype, p.oDims(Layout::HeadMajor), Layout::HeadMajor);
  in.call.k = rt.allocate("k_cache", p.dtype, p.kvDims(), Layout::KvCache);
  in.call.v = rt.allocate("v_cache", p.dtype, p.vDims(), Layout::KvCache);
  in.call.kvLen = p.kvLen;
  in.call.causal = p.causal;
  for (const Tensor* t : {&in.call.q, &in.call.k, &in.call.v}) {
    rt.upload(*t, randomUniforms(seed++, 0, static_cast<std::size_t>(t->numel())));
  }
  in.q = rt.download(in.call.q);
  in.k = rt.download(in.call.k);
  in.v = rt.download(in.call.v);
  return in;
}

/// The device output of `call` (already run) against the CPU reference of `p` on `in` (q rotated first
/// when the call fuses RoPE).
::testing::AssertionResult matchesCpu(Runtime& rt, AttentionProblem p, const Inputs& in) {
  std::vector<float> q = in.q;
  if (in.call.rope) {
    cpuRope(in.call.rope->spec, p.headDim, q, std::vector<std::uint32_t>(q.size() / p.headDim, in.call.rope->position));
  }
  p.modifiers = in.call.modifiers;
  const ErrorStats e = compareOutputs(rt.download(in.call.o), cpuAttention(p, q, in.k, in.v));
  const double bound = p.dtype == DType::F16 ? 3e-3 : 1e-4;
  if (e.nonFinite == 0 && e.maxRel <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format("max relative error {:.3g} (bound {:.1g}), {} non-finite",
                                                      e.maxRel, bound, e.nonFinite);
}

AttentionProblem decodeProblem(std::uint32_t kvLen) {
  AttentionProblem p;
  p.batch = 1, p.nHeads = 4, p.nKvHeads = 1, p.qLen = 1, p.kvLen = kvLen, p.kvCapacity = kvLen, p.headDim = 128;
  p.dtype = DType::F16;
  return p;
}

TEST(FusedAttention, RopeDecodeWithAUserModifierFromAFileIsPlannedOnceAndRunOften) {
  Runtime& rt = runtime();
  FusedAttention attention(rt);
  const AttentionProblem p = decodeProblem(300);
  RopeSpec rope;
  rope.theta = 500000.0;
  const Tensor invFreq = makeRopeTable(rt, rope, p.headDim);
  const auto temperature = std::make_shared<TemperatureStage>(temperatureFile(), 1.5f);
  const auto window = std::make_shared<SlidingWindowStage>(200, 0);
  for (std::uint32_t run = 0; run < 3; ++run) {
    Inputs in = upload(rt, p, 10 * run + 1);
    in.call.rope = FusedRope{rope, invFreq, 299};
    in.call.modifiers = {window, temperature};
    rt.poison(in.call.o);
    const AttentionRun r = attention.run(in.call);
    EXPECT_TRUE(matchesCpu(rt, p, in)) << "run " << run;
    ASSERT_FALSE(r.record.kernels.empty());
    EXPECT_THAT(r.record.kernels.back(), HasSubstr("Rope"));
    EXPECT_THAT(r.record.kernels.back(), HasSubstr("Temperature"));
    EXPECT_EQ(r.timings.dispatches.size(), r.record.kernels.size());
  }
  EXPECT_EQ(attention.plans(), 1u);  // three runs, one plan
}

TEST(FusedAttention, ADecodeTheSelectorSplitsRunsItsSplitKChainUnasked) {
  Runtime& rt = runtime();
  FusedAttention attention(rt);
  const AttentionProblem p = decodeProblem(2048);
  const auto temperature = std::make_shared<TemperatureStage>(temperatureFile(), 0.75f);
  Inputs in = upload(rt, p, 77);
  in.call.modifiers = {temperature};
  const PreparedAttention& plan = attention.plan(in.call);
  ASSERT_GT(plan.plan.splits, 1u) << "the Selector no longer splits this decode on this device: " << plan.plan.describe();
  for (std::uint32_t run = 0; run < 2; ++run) {
    rt.poison(in.call.o);
    const AttentionRun r = attention.run(in.call);
    EXPECT_EQ(r.record.plan.splits, plan.plan.splits);
    EXPECT_EQ(r.record.kernels, plan.kernelNames());
    EXPECT_TRUE(matchesCpu(rt, p, in)) << "run " << run << ": " << plan.plan.describe();
  }
  EXPECT_EQ(attention.plans(), 1u);
}

TEST(FusedAttention, ADecodeThatGrowsKeepsOnePlanAndRefitsItToEachLength) {
  // One cache of 2048 rows, decoded at lengths that cross the Selector's split point both ways: one
  // plan for the shapes, fitted to each call's length; the split kernels are built the first time a
  // length takes them.
  Runtime& rt = runtime();
  FusedAttention attention(rt);
  AttentionProblem p = decodeProblem(2048);
  Inputs in = upload(rt, p, 91);
  std::set<std::uint32_t> splits;
  for (const std::uint32_t kvLen : {20u, 300u, 2048u, 1500u, 21u}) {
    p.kvLen = in.call.kvLen = kvLen;
    rt.poison(in.call.o);
    const AttentionRun r = attention.run(in.call);
    const AttentionPlan direct = Selector::plan(p, rt.info(), {});
    EXPECT_EQ(r.record.plan.describe(), direct.describe()) << "kv " << kvLen;
    EXPECT_EQ(PreparedAttention::kernelsKey(r.record.plan), PreparedAttention::kernelsKey(direct));
    EXPECT_EQ(r.record.plan.grid, direct.grid);
    splits.insert(r.record.plan.splits);
    // The CPU reads the cache's first kv_len rows of each head: the rows past them hold other values.
    AttentionProblem packed = p;
    std::vector<float> k, v;
    for (std::uint32_t h = 0; h < p.nKvHeads; ++h) {
      const auto first = in.k.begin() + std::size_t(h) * p.kvCapacity * p.headDim;
      k.insert(k.end(), first, first + std::size_t(kvLen) * p.headDim);
      const auto vFirst = in.v.begin() + std::size_t(h) * p.kvCapacity * p.headDim;
      v.insert(v.end(), vFirst, vFirst + std::size_t(kvLen) * p.headDim);
    }
    packed.kvCapacity = kvLen;
    const ErrorStats e = compareOutputs(rt.download(in.call.o), cpuAttention(packed, in.q, k, v));
    EXPECT_TRUE(e.nonFinite == 0 && e.maxRel <= 3e-3) << "kv " << kvLen << ": " << e.maxRel;
  }
  EXPECT_EQ(attention.plans(), 1u);
  EXPECT_GT(splits.size(), 1u) << "no length crossed the split point; the test proves less than it says";
}

TEST(FusedAttention, PrefillWithAUserModifierGivenAsAString) {
  Runtime& rt = runtime();
  FusedAttention attention(rt, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}));
  AttentionProblem p = decodeProblem(96);
  p.qLen = 40, p.dtype = DType::F32;
  const auto glsl = GlslSource::fromText("inline_temperature", "float user_temperature_score(float s, uint b, uint h, "
                                                                "uint q, uint k) { return s / pc.user_temperature; }\n");
  Inputs in = upload(rt, p, 5);
  in.call.modifiers = {std::make_shared<TemperatureStage>(glsl, 2.0f)};
  rt.poison(in.call.o);
  attention.run(in.call);
  EXPECT_TRUE(matchesCpu(rt, p, in));
}

TEST(FusedAttention, APreparedPlanRefusesACallOfOtherShapes) {
  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  FlashAttentionStep step(lavapipe, SnippetLibrary::embedded(), AttentionOptions());
  const auto prepared = step.prepare(shapeCall(decodeShape(1, 4, 1, 300)));
  ::testing::StrictMock<MockDispatcher> dispatcher;
  ShapeWorkspace workspace;
  StepContext ctx{dispatcher, workspace};
  EXPECT_THAT([&] { step.run(ctx, *prepared, shapeCall(decodeShape(1, 4, 1, 256))); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("capacity256"), HasSubstr("capacity300"))));
  // The planned shape itself records.
  EXPECT_CALL(dispatcher, dispatch(::testing::_, ::testing::_, ::testing::_)).Times(::testing::AtLeast(1));
  EXPECT_NO_THROW(step.run(ctx, *prepared, shapeCall(decodeShape(1, 4, 1, 300))));
}

TEST(FusedAttention, AGlslFileThatIsMissingIsNamedWhenTheStageIsMade) {
  EXPECT_THAT([] { GlslSource::fromFile("/nonexistent/temperature.glsl"); },
              ::testing::ThrowsMessage<UserError>(HasSubstr("/nonexistent/temperature.glsl")));
}

}  // namespace
}  // namespace foundry::test
