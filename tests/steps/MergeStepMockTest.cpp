// MergeStep against a mocked dispatcher: the kernels, grids, bindings and strides a merge records
// (one kernel, or groups into scratch and then the groups), and the calls it refuses before recording.
// FlashAttentionStep's LSE output: which kernel of each variant binds it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/steps/MergeStep.h"
#include "foundry/testing/Mocks.h"
#include "foundry/testing/ShapeCall.h"
#include "foundry/testing/StepMockTest.h"

namespace foundry {
namespace {

using test::Binds;
using test::KernelNamed;
using test::KernelStages;
using test::LacksBinding;
using test::PushU32;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::StrictMock;

/// Part i of a [batch 2, 4 heads, 19 tokens, 64] merge: its output and its LSE, shapes only.
MergePart part(std::uint32_t i, DType dtype = DType::F16) {
  return {Tensor::describe(fmt::format("o{}", i), dtype, {2, 4, 19, 64}, Layout::HeadMajor),
          Tensor::describe(fmt::format("lse{}", i), DType::F32, {2, 4, 19})};
}

MergeCall mergeOf(std::uint32_t parts) {
  MergeCall c;
  for (std::uint32_t i = 0; i < parts; ++i) c.parts.push_back(part(i));
  c.o = Tensor::describe("merged", DType::F32, {2, 19, 4, 64}, Layout::TokenMajor);
  return c;
}

class MergeMockTest : public ::testing::Test {
 protected:
  DeviceInfo device = parseDevicePreset("lavapipe");
  MergeStep step{device, SnippetLibrary::embedded()};
  StrictMock<test::MockDispatcher> dispatcher;
  ShapeWorkspace workspace;
  StepContext ctx{dispatcher, workspace};
};

TEST_F(MergeMockTest, TwoPartsRecordOneKernelWithAWorkgroupPerRow) {
  MergeCall call = mergeOf(2);
  call.lse = Tensor::describe("merged_lse", DType::F32, {2, 4, 19});
  EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("LseMergeStage")),
                                         KernelNamed("LseMerge__p2_D64_f16_to_f32_lse")),
                                   AllOf(Binds("part0_o", "o0"), Binds("part0_lse", "lse0"), Binds("part1_o", "o1"),
                                         Binds("part1_lse", "lse1"), Binds("o", "merged"), Binds("lse", "merged_lse"),
                                         PushU32("n_heads", 4), PushU32("q_len", 19),
                                         PushU32("part_stride_b", 4 * 19 * 64), PushU32("part_stride_h", 19 * 64),
                                         PushU32("part_stride_s", 64), PushU32("o_stride_b", 19 * 4 * 64),
                                         PushU32("o_stride_h", 64), PushU32("o_stride_s", 4 * 64)),
                                   (Grid{19, 4, 2})));
  const MergeRecord r = step.run(ctx, call);
  EXPECT_THAT(r.grids, ElementsAre(Grid{19, 4, 2}));
  EXPECT_TRUE(workspace.requests().empty());
}

TEST_F(MergeMockTest, ElevenPartsMergeInGroupsOfEightThenTheGroups) {
  static_assert(MergeStep::kPartsPerKernel == 8);
  const MergeCall call = mergeOf(11);
  {
    InSequence order;
    EXPECT_CALL(dispatcher, dispatch(KernelNamed("LseMerge__p8_D64_f16_to_f32_lse"),
                                     AllOf(Binds("part7_o", "o7"), Binds("o", "merge_o_l0_g0"),
                                           Binds("lse", "merge_lse_l0_g0")),
                                     (Grid{19, 4, 2})));
    EXPECT_CALL(dispatcher, dispatch(KernelNamed("LseMerge__p3_D64_f16_to_f32_lse"),
                                     AllOf(Binds("part0_o", "o8"), Binds("part2_o", "o10"),
                                           Binds("o", "merge_o_l0_g1"), Binds("lse", "merge_lse_l0_g1")),
                                     (Grid{19, 4, 2})));
    // The groups' f32 results, head-major packed, into the call's output; no LSE was asked for.
    EXPECT_CALL(dispatcher, dispatch(KernelNamed("LseMerge__p2_D64_f32_to_f32"),
                                     AllOf(Binds("part0_o", "merge_o_l0_g0"), Binds("part1_lse", "merge_lse_l0_g1"),
                                           Binds("o", "merged"), LacksBinding("lse"), PushU32("part_stride_h", 19 * 64)),
                                     (Grid{19, 4, 2})));
  }
  EXPECT_EQ(step.run(ctx, call).kernels.size(), 3u);
  EXPECT_EQ(workspace.requests().size(), 4u);
}

TEST_F(MergeMockTest, RefusedCallsRecordNothing) {
  EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(0);
  EXPECT_THAT([&] { step.run(ctx, mergeOf(0)); }, ::testing::ThrowsMessage<UserError>(HasSubstr("no parts to merge")));
  MergeCall shapes = mergeOf(3);
  shapes.parts[2].o.dims[2] = 18;
  EXPECT_THAT([&] { step.run(ctx, shapes); }, ::testing::ThrowsMessage<UserError>(HasSubstr("q_len 18")));
  MergeCall dtypes = mergeOf(2);
  dtypes.parts[1] = part(1, DType::F32);
  EXPECT_THAT([&] { step.run(ctx, dtypes); }, ::testing::ThrowsMessage<UserError>(HasSubstr("mixed dtypes")));
  EXPECT_TRUE(workspace.requests().empty());
}

// ---- the LSE of FlashAttentionStep ------------------------------------------------------------------

using test::StepMockTest;

TEST_F(StepMockTest, SplitKDecodeWithAReduceKernelWritesTheLseThere) {
  pretend("h200", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}));
  test::CallShape s = test::decodeShape(1, 32, 8, 8192);
  s.lse = true;
  {
    InSequence order;
    EXPECT_CALL(dispatcher, dispatch(KernelNamed("HeadLayout_KvAccess_FlashDecode__g4_f16_w4_D128_f16_h4_w8_k2_u4_v4_float_split"),
                                     LacksBinding("lse"), _));
    EXPECT_CALL(dispatcher, dispatch(KernelNamed("FlashDecodeSplitKReduce__D128_f16_lse"),
                                     AllOf(Binds("lse", "lse"), Binds("o", "out")), (Grid{32, 1, 1})));
  }
  run(test::shapeCall(s));
}

TEST_F(StepMockTest, SplitKDecodeMergedInItsLastWorkgroupWritesTheLseThere) {
  pretend("h200");
  test::CallShape s = test::decodeShape(1, 32, 8, 8192);
  s.lse = true;
  EXPECT_CALL(dispatcher, dispatch(KernelNamed("HeadLayout_KvAccess_FlashDecode__g4_f16_w4_D128_f16_h4_w8_k2_u4_v4_float_split_merged_bm_lse"),
                                   AllOf(Binds("lse", "lse"), Binds("o", "out")), (Grid{16, 8, 1})));
  run(test::shapeCall(s));
}

TEST_F(StepMockTest, LseOfAnotherShapeIsRefused) {
  pretend("lavapipe");
  AttentionCall c = test::shapeCall(test::prefillShape(8, 2, 16, 64, 64));
  c.lse = Tensor::describe("lse", DType::F32, {1, 8, 15});
  expectRefused<UserError>(c, HasSubstr("needs packed [1, 8, 16]"));
}

}  // namespace
}  // namespace foundry
