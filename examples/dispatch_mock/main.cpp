// What FlashAttentionStep records, asserted with GMock and no GPU: the device is a preset (an H200
// here) and the dispatcher a StrictMock from Foundry::testing, so a test states a GPU and a call and
// checks the kernels, grids, push constants and bindings of the Selector's decisions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <foundry/foundry.h>
#include <foundry/testing/ShapeCall.h>
#include <foundry/testing/StepMockTest.h>

namespace {

using foundry::test::Binds;
using foundry::test::KernelStages;
using foundry::test::PushU32;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;

using DispatchDecisions = foundry::test::StepMockTest;

// A long decode on an H200: 8 KV groups for 132 SMs, so the Selector splits the keys 16 ways and the
// last workgroup of each group merges the splits: one dispatch, no reduce kernel.
TEST_F(DispatchDecisions, LongDecodeOnAnH200IsOneSplitKDispatch) {
  pretend("h200");
  const foundry::AttentionCall call = foundry::test::shapeCall(foundry::test::decodeShape(1, 32, 8, 8192));
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                   AllOf(PushU32("n_splits", 16), PushU32("kv_len", 8192), Binds("o", "out")),
                                   (foundry::Grid{16, 8, 1})));
  const foundry::StepRecord record = run(call);
  EXPECT_EQ(record.plan.splits, 16u);
}

// The same call with the knob that asks for a reduce kernel: two dispatches, in order.
TEST_F(DispatchDecisions, AReduceKernelWhenTheKnobAsksForOne) {
  pretend("h200", foundry::AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}));
  const foundry::AttentionCall call = foundry::test::shapeCall(foundry::test::decodeShape(1, 32, 8, 8192));
  ::testing::InSequence order;
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")), _, _));
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("FlashDecodeSplitKReduceStage")), Binds("o", "out"), _));
  run(call);
}

}  // namespace
