// What modifiers change in the dispatches a step records, against a mocked device and dispatcher (no
// GPU, no compilation): the Selector splits a windowed decode over the window; a mask's block-map
// pass is recorded before the prefill kernel that reads it; each kernel of a Split-K pair takes only
// the modifiers whose hooks it hosts; and a chain a kernel cannot host (two sinks, a hook a variant
// lacks) is refused before anything is built or recorded, naming the stage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/modifiers/MaskStage.h"
#include "foundry/stages/modifiers/SinksStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/SdpaReferenceStep.h"
#include "foundry/testing/Mocks.h"
#include "foundry/testing/ShapeCall.h"
#include "foundry/testing/StepMockTest.h"

namespace foundry {
namespace {

using test::Binds;
using test::decodeShape;
using test::KernelNamed;
using test::KernelStages;
using test::prefillShape;
using test::PushU32;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::IsEmpty;

using ModifierMockTest = test::StepMockTest;

PerHeadValues sinkValues(std::uint32_t heads) {
  PerHeadValues v;
  v.tensor = Tensor::describe("sinks", DType::F32, {heads});
  v.values.assign(heads, 1.0);
  return v;
}

TEST_F(ModifierMockTest, TheSelectorSplitsAWindowedDecodeOverTheWindowNotTheCache) {
  pretend("h200");
  // Plain decode at kv 65536: 8 head groups, 16 splits of 4096 keys over the whole cache.
  const AttentionPlan plain = step().plan(test::shapeCall(decodeShape(1, 32, 8, 65536)));
  EXPECT_EQ(plain.visibleKeys, 65536u);
  EXPECT_EQ(plain.splits * plain.kvChunk, 65536u);
  // With a 4096-key window (Mistral's): the same 16 splits divide the 4096 keys the query sees.
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 65536));
  call.modifiers = {SlidingWindowStage::fromModelWindow(4096)};
  const AttentionPlan windowed = step().plan(call);
  EXPECT_EQ(windowed.visibleKeys, 4096u);
  EXPECT_LE(windowed.kvChunk, 4096u / 8);
  EXPECT_GE(windowed.splits * windowed.kvChunk, 4096u);
  EXPECT_LT((windowed.splits - 1) * windowed.kvChunk, 4096u);
  const auto split = std::find_if(windowed.decisions.begin(), windowed.decisions.end(),
                                  [](const Decision& d) { return d.what == "split-k"; });
  ASSERT_NE(split, windowed.decisions.end());
  EXPECT_THAT(split->reason, HasSubstr("over the 4096 visible keys of 65536"));
  // What is recorded: the window's extents and the chunk, in one dispatch merged in place.
  EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "SlidingWindowStage",
                                                                  "FlashDecodeStage")),
                                         KernelNamed(HasSubstr("SlidingWindow"))),
                                   AllOf(PushU32("window_left", 4095), PushU32("window_right", 0),
                                         PushU32("kv_chunk", windowed.kvChunk), PushU32("n_splits", windowed.splits),
                                         PushU32("kv_len", 65536)),
                                   (Grid{windowed.splits, 8, 1})));
  run(call);
}

TEST_F(ModifierMockTest, DecodeDropsTheCausalMaskItDoesNotNeed) {
  pretend("h200");
  // A single query at the end of its sequence sees every key: the causal modifier changes nothing.
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")), _, _));
  const StepRecord r = run(test::shapeCall(decodeShape(1, 32, 8, 1000)));
  EXPECT_THAT(r.modifiers, IsEmpty());
}

TEST_F(ModifierMockTest, AMaskedPrefillRecordsTheBlockMapPassFirstAtTheKernelsTileShape) {
  pretend("lavapipe");
  AttentionCall call = test::shapeCall(prefillShape(4, 1, 64, 64));
  call.causal = false;
  const Tensor mask = Tensor::describe("my_mask", DType::U32, {1, 1, 64, 2});
  call.modifiers = {MaskStage::bits(mask, std::vector<std::uint32_t>(128, ~0u))};
  const AttentionPlan plan = step().plan(call);
  ASSERT_EQ(plan.tile, (TileShape{8, 16}));  // lavapipe: 2 subgroups x 4 rows, 16 keys
  {
    InSequence inOrder;
    // 4 key tiles x 8 query tiles, one mask for every batch and head.
    EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("MaskBlockMapStage")),
                                     AllOf(Binds("mask_bits", "my_mask"), Binds("mask_blocks", "mask_blocks"),
                                           PushU32("mask_tile_q", 8), PushU32("mask_tile_k", 16),
                                           PushU32("mask_k_tiles", 4), PushU32("mask_stride_b", 0)),
                                     (Grid{4, 8, 1})));
    EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "MaskStage", "SdpaPrefillStage")),
                                     AllOf(Binds("mask_bits", "my_mask"), Binds("mask_blocks", "mask_blocks"),
                                           PushU32("mask_tile_q", 8), PushU32("mask_tile_k", 16)),
                                     _));
  }
  const StepRecord r = run(call);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_THAT(r.kernels[0], HasSubstr("MaskBlockMap"));
}

TEST_F(ModifierMockTest, EachKernelOfASplitKPairTakesTheModifiersItHosts) {
  pretend("lavapipe", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_SPLIT_K", "4"}}));
  AttentionCall call = test::shapeCall(prefillShape(4, 1, 8, 4096));
  call.modifiers = {std::make_shared<SoftCapStage>(30.0), std::make_shared<SinksStage>(sinkValues(4))};
  InSequence inOrder;
  // The key loop's hooks (causal, soft-cap) in the part kernel; the sinks where the partials merge.
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "CausalStage", "SoftCapStage",
                                                            "SdpaPrefillSplitKPartStage")),
                                   AllOf(test::PushF32Near("soft_cap", 30.0f, 1e-6f), test::LacksBinding("attn_sinks")), _));
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("SinksStage", "SdpaPrefillSplitKReduceStage")),
                                   AllOf(Binds("attn_sinks", "sinks"), test::LacksPush("soft_cap")), _));
  run(call);
}

TEST_F(ModifierMockTest, TwoSinksAreRefusedBeforeAnythingIsBuiltNamingBothStages) {
  pretend("h200");
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 1000));
  call.modifiers = {std::make_shared<SinksStage>(sinkValues(32)), std::make_shared<SinksStage>(sinkValues(32))};
  EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(0);
  EXPECT_THAT([&] { run(call); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("stages SinksStage and SinksStage both hook 'fa_sink'"),
                                                        HasSubstr("one stage sets sinks"))));
  EXPECT_THAT(workspace.requests(), IsEmpty());
}

/// A user's tile skipper that insists on being run (not a hint): decode kernels have no tiles.
class TileOnlyStage : public AttentionModifier {
 public:
  std::string name() const override { return "TileOnlyStage"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.snippetText("tile_only", "bool tile_only(uint b, uint h, uint q_lo, uint q_hi, uint k_lo, uint k_hi) { return true; }\n");
    k.hook(hook::kTileVisible, "tile_only");
  }
};

TEST_F(ModifierMockTest, AHookTheVariantDoesNotHostIsRefusedNamingTheStage) {
  pretend("h200");
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 1000));
  call.modifiers = {std::make_shared<TileOnlyStage>()};
  EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(0);
  EXPECT_THAT([&] { run(call); },
              ::testing::ThrowsMessage<UserError>(AllOf(HasSubstr("stage TileOnlyStage hooks 'fa_tile_visible'"),
                                                        HasSubstr("no stage of this kernel hosts that point"))));
}

TEST_F(ModifierMockTest, AModifierThatDoesNotFitTheCallIsAUserErrorNamingItsField) {
  pretend("h200");
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 1000));
  call.modifiers = {std::make_shared<SinksStage>(sinkValues(8))};
  EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(0);
  try {
    run(call);
    FAIL() << "accepted 8 sinks for 32 heads";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "sinks");
    EXPECT_THAT(e.what(), HasSubstr("32 values (one per query head)"));
  }
}

TEST_F(ModifierMockTest, TheReferencePathHandsEachOfItsKernelsItsOwnHooks) {
  pretend("lavapipe");
  SdpaReferenceStep reference(device(), SnippetLibrary::embedded());
  AttentionCall call = test::shapeCall(prefillShape(4, 1, 16, 16));
  call.modifiers = {std::make_shared<SoftCapStage>(30.0), std::make_shared<SinksStage>(sinkValues(4))};
  InSequence inOrder;
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("KvAccessStage", "CausalStage", "SoftCapStage", "ReferenceScoresStage")), _, _));
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("SinksStage", "ReferenceSoftmaxStage")), _, _));
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("KvAccessStage", "ReferencePvStage")), _, _));
  reference.run(ctx, call);
}

}  // namespace
}  // namespace foundry
