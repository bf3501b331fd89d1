// FlashAttentionStep against a mocked device and a mocked dispatcher: exactly which kernels, grids,
// bindings and push constants a call records, in order; and that a call the step refuses records
// nothing. Shape-only tensors and a ShapeWorkspace: no device, no compilation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/testing/Mocks.h"
#include "foundry/testing/ShapeCall.h"
#include "foundry/testing/StepMockTest.h"

namespace foundry {
namespace {

using test::Binds;
using test::CallShape;
using test::decodeShape;
using test::prefillShape;
using test::KernelNamed;
using test::KernelStages;
using test::LacksBinding;
using test::LacksPush;
using test::PushF32Near;
using test::PushU32;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StrictMock;

using test::StepMockTest;

float log2eOverSqrt(std::uint32_t headDim) {
  return static_cast<float>(std::numbers::log2e / std::sqrt(static_cast<double>(headDim)));
}

// ---- decode ---------------------------------------------------------------------------------------

TEST_F(StepMockTest, LongDecodeOnH200RecordsOneSplitKDispatchThatMergesInItsLastWorkgroup) {
  pretend("h200");
  // 8 KV groups of 4 heads = 8 workgroups for 132 compute units: 132 / 8 = 16 splits (one whole wave)
  // of 512 keys, a multiple of the granule of 8 warps x 2 keys x unroll 4 = 64. The last workgroup of
  // each head group to finish merges the 16 partials: one dispatch, one arrival counter per group.
  const AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 8192));
  const KernelSource* recorded = nullptr;
  EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                         KernelNamed("HeadLayout_KvAccess_FlashDecode__g4_f16_w4_D128_f16_h4_w8_k2_u4_v4_float_split_merged_bm")),
                                   AllOf(PushU32("n_splits", 16), PushU32("kv_chunk", 512), PushU32("kv_len", 8192),
                                         PushU32("n_heads", 32), PushU32("n_kv_heads", 8), PushU32("q_len", 1),
                                         PushU32("q_stride_b", 32 * 128), PushU32("q_stride_h", 128),
                                         PushU32("k_stride_b", 8 * 8192 * 128), PushU32("k_stride_h", 8192 * 128),
                                         PushF32Near("qk_scale", log2eOverSqrt(128), 1e-6f), Binds("q", "q"),
                                         Binds("k_cache", "k_cache"), Binds("v_cache", "v_cache"),
                                         Binds("partial_o", "splitk_partial_o"),
                                         Binds("partial_ml", "splitk_partial_ml"), Binds("o", "out"),
                                         Binds("split_arrivals", "splitk_arrivals")),
                                   (Grid{16, 8, 1})))
      .WillOnce([&](const KernelSource& k, const Arguments& a, Grid) {
        checkArguments(k, a);
        recorded = &k;
      });
  const StepRecord record = run(call);
  EXPECT_EQ(record.plan.splits, 16u);
  EXPECT_FALSE(record.plan.reduceKernel());
  EXPECT_THAT(record.kernels, ElementsAre("HeadLayout_KvAccess_FlashDecode__g4_f16_w4_D128_f16_h4_w8_k2_u4_v4_float_split_merged_bm"));
  ASSERT_EQ(workspace.requests().size(), 3u);
  EXPECT_EQ(workspace.requests()[0].dims, (std::vector<std::int64_t>{1, 32, 1, 16, 128}));
  EXPECT_EQ(workspace.requests()[1].dims, (std::vector<std::int64_t>{1, 32, 1, 16, 2}));
  EXPECT_EQ(workspace.requests()[2].dims, (std::vector<std::int64_t>{1, 8}));  // batch x head groups
  EXPECT_EQ(workspace.requests()[0].dtype, DType::F32);
  ASSERT_NE(recorded, nullptr);
  // Partials another workgroup reads back are coherent; the counter is a device-wide atomic.
  EXPECT_THAT(recorded->glsl, AllOf(HasSubstr("coherent buffer Buffer_partial_o"), HasSubstr("atomicAdd(split_arrivals"),
                                    HasSubstr("memoryBarrierBuffer()")));
}

TEST_F(StepMockTest, FusedReduceOffRecordsASplitKPartThenTheReduce) {
  pretend("h200", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}));
  const AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 8192));
  {
    InSequence inOrder;
    EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                           KernelNamed("HeadLayout_KvAccess_FlashDecode__g4_f16_w4_D128_f16_h4_w8_k2_u4_v4_float_split")),
                                     AllOf(PushU32("n_splits", 16), PushU32("kv_chunk", 512),
                                           Binds("partial_o", "splitk_partial_o"),
                                           Binds("partial_ml", "splitk_partial_ml"), LacksBinding("o"),
                                           LacksBinding("split_arrivals")),
                                     (Grid{16, 8, 1})));
    EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("FlashDecodeSplitKReduceStage")),
                                           KernelNamed("FlashDecodeSplitKReduce__D128_f16")),
                                     AllOf(PushU32("n_splits", 16), PushU32("n_heads", 32), Binds("o", "out"),
                                           Binds("partial_o", "splitk_partial_o"),
                                           Binds("partial_ml", "splitk_partial_ml"), LacksBinding("q")),
                                     (Grid{32, 1, 1})));
  }
  const StepRecord record = run(call);
  EXPECT_THAT(record.kernels, ElementsAre("HeadLayout_KvAccess_FlashDecode__g4_f16_w4_D128_f16_h4_w8_k2_u4_v4_float_split",
                                          "FlashDecodeSplitKReduce__D128_f16"));
  EXPECT_EQ(workspace.requests().size(), 2u);
}

TEST_F(StepMockTest, ShortDecodeOnH200WritesTheOutputDirectly) {
  pretend("h200");
  // Fewer than 256 keys: one split, whose chunk covers the cache in whole granules of 8 x 2 x 4 keys.
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                   AllOf(Binds("o", "out"), LacksBinding("partial_o"), LacksPush("n_splits"),
                                         PushU32("kv_chunk", 256), PushU32("kv_len", 200)),
                                   (Grid{1, 8, 1})));
  const StepRecord record = run(test::shapeCall(decodeShape(1, 32, 8, 200)));
  EXPECT_EQ(record.kernels.size(), 1u);
  EXPECT_THAT(workspace.requests(), IsEmpty());
}

TEST_F(StepMockTest, DecodeOnLavapipeIsTheSubgroupVariantWithoutCooperativeMatrices) {
  pretend("lavapipe");
  const KernelSource* recorded = nullptr;
  {
    InSequence inOrder;
    // One workgroup (4 heads share the KV head) on 2 compute units: one wave, 2 splits of 1024 keys.
    EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                     AllOf(PushU32("n_splits", 2), PushU32("kv_chunk", 1024)), (Grid{2, 1, 1})))
        .WillOnce([&](const KernelSource& k, const Arguments& a, Grid) {
          checkArguments(k, a);
          recorded = &k;
        });
  }
  const StepRecord record = run(test::shapeCall(decodeShape(1, 4, 1, 2048)));
  EXPECT_TRUE(record.plan.decodeVariant.fusedReduce);
  EXPECT_FALSE(record.plan.decodeVariant.scalar);
  ASSERT_NE(recorded, nullptr);
  EXPECT_FALSE(recorded->usesCoopMat);
  EXPECT_EQ(recorded->layout.subgroupSize, 8u);
  EXPECT_EQ(recorded->layout.workgroup[0], 32u);  // 4 subgroups of 8
  EXPECT_THAT(recorded->glsl, AllOf(HasSubstr("GL_KHR_shader_subgroup_shuffle"), HasSubstr("flash_decode_subgroup"),
                                    Not(HasSubstr("cooperative_matrix"))));
}

TEST_F(StepMockTest, DecodeWithoutShufflesRecordsTheScalarKernel) {
  DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  lavapipe.subgroupShuffle = false;
  pretend(lavapipe);
  EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                         KernelNamed(HasSubstr("_scalar_")),
                                         ::testing::Field(&KernelSource::glsl, Not(HasSubstr("subgroup_shuffle")))),
                                   _, (Grid{1, 8, 1})));
  run(test::shapeCall(decodeShape(1, 32, 8, 256)));
}

TEST_F(StepMockTest, FusedRopeDecodeRecordsOneKernelThatRotatesTheQuery) {
  pretend("h200");
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "RopeStage", "FlashDecodeFusedStage")),
                                   AllOf(Binds("rope_inv_freq", "rope_inv_freq"), PushU32("rope_pos0", 299),
                                         Binds("q", "q"), Binds("o", "out")),
                                   (Grid{1, 8, 1})));
  run(test::withRope(test::shapeCall(decodeShape(1, 32, 8, 300)), 128, 299));
}

TEST_F(StepMockTest, TokenMajorQueriesPassTheirStridesAsPushConstants) {
  pretend("h200");
  CallShape s = prefillShape(8, 2, 64, 64);
  s.qLayout = Layout::TokenMajor;
  ASSERT_TRUE(device().hasCoopMat({16, 16, 16, DType::F16, DType::F32}));
  // The coopmat prefill kernel is not asserted here: use f32, which takes the subgroup variant.
  s.dtype = DType::F32;
  EXPECT_CALL(dispatcher,
              dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "CausalStage", "SdpaPrefillStage")),
                       AllOf(PushU32("q_stride_b", 64 * 8 * 128), PushU32("q_stride_h", 128),
                             PushU32("q_stride_s", 8 * 128), PushU32("o_stride_s", 8 * 128),
                             PushU32("k_stride_h", 64 * 128), PushU32("n_kv_heads", 2), PushU32("n_splits", 1)),
                       _));
  run(test::shapeCall(s));
}

TEST_F(StepMockTest, TokenMajorCachesPassTheirRowStrideToTheKvAccessStage) {
  pretend("h200");
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 300));
  const std::int64_t cap = call.k.dim(2);
  for (Tensor* t : {&call.k, &call.v}) {
    *t = Tensor::describe(t->name, DType::BF16, {1, cap, 8, 128}, Layout::TokenMajor);
  }
  call.q.dtype = DType::BF16;
  call.o.dtype = DType::F32;
  EXPECT_CALL(dispatcher,
              dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                             KernelNamed(HasSubstr("KvAccess_FlashDecode__g4_bf16_w"))),
                       AllOf(PushU32("k_stride_b", cap * 8 * 128), PushU32("k_stride_h", 128),
                             PushU32("k_stride_s", 8 * 128), PushU32("v_stride_s", 8 * 128)),
                       (Grid{1, 8, 1})));
  run(call);
}

TEST_F(StepMockTest, PagedDecodePlansAsContiguousAndBindsTheBlockTable) {
  pretend("h200");
  // Two sequences of 8192 keys in pages of 64, scattered in reverse order over a pool of 256 pages:
  // the same loads, unroll and splits as a contiguous cache, the block table bound, the batch stride
  // stepping over pages.
  const AttentionCall flat = test::shapeCall(decodeShape(2, 32, 8, 8192));
  const AttentionCall call = test::withPages(flat, 64);
  const AttentionPlan want = step().plan(flat), got = step().plan(call);
  EXPECT_EQ(got.decodeVariant.pageSize, 64u);
  EXPECT_EQ(got.decodeVariant.vecWidth, want.decodeVariant.vecWidth);
  EXPECT_EQ(got.decodeVariant.unroll, want.decodeVariant.unroll);
  EXPECT_EQ(got.decodeVariant.keysPerWarp, want.decodeVariant.keysPerWarp);
  EXPECT_EQ(got.splits, want.splits);
  EXPECT_EQ(got.grid, want.grid);
  EXPECT_CALL(dispatcher,
              dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                             KernelNamed(AllOf(HasSubstr("KvAccess_FlashDecode__g4_f16_w"), HasSubstr("_pg64")))),
                       AllOf(Binds("block_table", "block_table"), PushU32("block_table_stride", 128),
                             PushU32("k_stride_b", 8 * 64 * 128), PushU32("k_stride_h", 64 * 128),
                             PushU32("k_stride_s", 128), PushU32("kv_len", 8192)),
                       want.grid));
  run(call);
}

TEST_F(StepMockTest, Int8DecodeOnH200RecordsSixteenCodeLoadsAndBindsTheScales) {
  pretend("h200");
  // 65536 int8 keys: the tensor-core kernel (16-byte loads of 16-key tiles, 2 in flight taken as a pair,
  // 8 subgroups), 16 splits of 4096 keys over the compute units merged in the last workgroup; the scales
  // bound beside the codes with their own strides (one f16 per 32 keys x 32 dimensions).
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 65536));
  for (Tensor* t : {&call.k, &call.v}) {
    t->dtype = DType::I8;
    t->scales = std::make_shared<Tensor>(scalesShape(*t));
  }
  const auto binds = AllOf(Binds("k_cache", "k_cache"), Binds("k_scales", "k_cache.scales"),
                           Binds("v_scales", "v_cache.scales"), PushU32("k_scale_stride_h", 2048 * 4),
                           PushU32("k_scale_stride_s", 4));
  EXPECT_CALL(dispatcher,
              dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                             KernelNamed(HasSubstr("KvAccess_FlashDecode__g4_int8v1_w16_D128_int8_h4_w8_k1_u2_v16_tcp_"
                                                   "float_split_merged"))),
                       AllOf(binds, PushU32("kv_len", 65536), PushU32("kv_chunk", 4096), PushU32("n_splits", 16)),
                       Grid{16, 8, 1}));
  run(call);
  // 4096 keys split 16 ways leave 256 a workgroup: the subgroup kernel (16 codes per load, 4 keys per
  // subgroup step, 4 steps in flight).
  AttentionCall shorter = test::shapeCall(decodeShape(1, 32, 8, 4096));
  for (Tensor* t : {&shorter.k, &shorter.v}) {
    t->dtype = DType::I8;
    t->scales = std::make_shared<Tensor>(scalesShape(*t));
  }
  EXPECT_CALL(dispatcher,
              dispatch(KernelNamed(HasSubstr("KvAccess_FlashDecode__g4_int8v1_w16_D128_int8_h4_w8_k4_u4_v16")),
                       AllOf(Binds("k_scales", "k_cache.scales"), PushU32("k_scale_stride_h", 128 * 4),
                             PushU32("kv_len", 4096), PushU32("kv_chunk", 256)),
                       _));
  run(shorter);
}

TEST_F(StepMockTest, APreparedDecodeIsFittedToEachCallsKvLength) {
  pretend("h200");
  // Prepared at 300 keys (no split), recorded at 8192 (16 splits merged in the last workgroup) and at
  // 500: the prepared variant fitted to each length, the split kernel built for the
  // length that takes it, the prepared kernel recorded again where the length allows.
  AttentionCall call = test::shapeCall(decodeShape(1, 32, 8, 300));
  call.k = call.v = Tensor::describe("k_cache", DType::F16, {1, 8, 8192, 128}, Layout::KvCache);
  call.v.name = "v_cache";
  const auto prepared = step().prepare(call);
  ASSERT_EQ(prepared->plan.splits, 1u);
  std::vector<std::string> names;
  EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(3).WillRepeatedly([&](const KernelSource& k, const Arguments& a, Grid g) {
    names.push_back(fmt::format("{} kv{} grid{}", k.name, a.pushU32("kv_len"), g.x));
  });
  for (const std::uint32_t kvLen : {300u, 8192u, 500u}) {
    call.kvLen = kvLen;
    const StepRecord r = step().run(ctx, *prepared, call);
    call.kvLen = kvLen;
    EXPECT_EQ(r.plan.describe(), step().plan(call).describe()) << kvLen;
  }
  ASSERT_EQ(names.size(), 3u);
  EXPECT_THAT(names[0], AllOf(HasSubstr("_float kv300 grid1"), Not(HasSubstr("split"))));
  EXPECT_THAT(names[1], HasSubstr("_float_split_merged_bm kv8192 grid16"));
  EXPECT_THAT(names[2], AllOf(HasSubstr("kv500 grid1"), Not(HasSubstr("split"))));
  // Another capacity is another shape: refused, naming both.
  call.k.dims[2] = call.v.dims[2] = 4096;
  call.k.strides = call.v.strides = Tensor::packedStrides(call.k.dims);
  EXPECT_THAT([&] { step().run(ctx, *prepared, call); }, ::testing::ThrowsMessage<UserError>(HasSubstr("capacity4096")));
}

TEST_F(StepMockTest, KernelsAreBuiltOncePerVariant) {
  pretend("h200");
  std::vector<const KernelSource*> seen;
  EXPECT_CALL(dispatcher, dispatch(_, _, _))
      .Times(2)
      .WillRepeatedly([&](const KernelSource& k, const Arguments&, Grid) { seen.push_back(&k); });
  run(test::shapeCall(decodeShape(1, 32, 8, 100)));
  run(test::shapeCall(decodeShape(1, 32, 8, 200)));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], seen[1]);
}

// ---- prefill --------------------------------------------------------------------------------------

TEST_F(StepMockTest, H200PrefillPlansTheCooperativeMatrixVariant) {
  pretend("h200");
  // Plan only: the cooperative-matrix kernel itself is not built here.
  EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(0);
  const AttentionPlan plan = step().plan(test::shapeCall(prefillShape(32, 8, 1024, 1024)));
  EXPECT_FALSE(plan.decode);
  EXPECT_TRUE(plan.prefillVariant.coopMat);
  EXPECT_EQ(plan.prefillVariant.rowsPerWarp, 16u);
  EXPECT_EQ(plan.grid, (Grid{32, 1024 / plan.prefillVariant.rowsPerWorkgroup(), 1}));
  // Turned off by the knob, the same call plans the subgroup variant.
  pretend("h200", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}));
  EXPECT_FALSE(step().plan(test::shapeCall(prefillShape(32, 8, 1024, 1024))).prefillVariant.coopMat);
}

TEST_F(StepMockTest, LavapipePrefillRecordsTheSubgroupKernel) {
  pretend("lavapipe");
  const KernelSource* recorded = nullptr;
  // 64 rows in tiles of 2 subgroups x 4 rows: 8 tiles x 8 heads = 64 workgroups, no split.
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "CausalStage", "SdpaPrefillStage")),
                                   AllOf(PushU32("n_splits", 1), PushU32("kv_chunk", 128), PushU32("q_len", 64),
                                         Binds("o", "out"), LacksBinding("partial_o")),
                                   (Grid{8, 8, 1})))
      .WillOnce([&](const KernelSource& k, const Arguments& a, Grid) {
        checkArguments(k, a);
        recorded = &k;
      });
  const StepRecord record = run(test::shapeCall(prefillShape(8, 8, 64, 128)));
  EXPECT_FALSE(record.plan.prefillVariant.coopMat);
  ASSERT_NE(recorded, nullptr);
  EXPECT_FALSE(recorded->usesCoopMat);
  EXPECT_THAT(recorded->glsl, Not(HasSubstr("cooperative_matrix")));
}

TEST_F(StepMockTest, PrefillWithFewQueryTilesAndALongCacheRecordsSplitKPartThenReduce) {
  pretend("lavapipe");
  // One tile of 8 rows x 1 head on 2 compute units: min(ceil(4 / 1), 4096 / (4 x 16)) = 4 splits of
  // 1024 keys (16 keys per tile).
  {
    InSequence inOrder;
    EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "CausalStage", "SdpaPrefillSplitKPartStage")),
                                     AllOf(PushU32("n_splits", 4), PushU32("kv_chunk", 1024),
                                           Binds("partial_o", "splitk_partial_o"),
                                           Binds("partial_ml", "splitk_partial_ml"), LacksBinding("o")),
                                     (Grid{1, 4, 1})));
    EXPECT_CALL(dispatcher,
                dispatch(AllOf(KernelStages(ElementsAre("SdpaPrefillSplitKReduceStage")),
                               ::testing::Field(&KernelSource::layout,
                                                ::testing::Field(&KernelLayout::workgroup, ElementsAre(64u, 1u, 1u)))),
                         AllOf(PushU32("n_splits", 4), PushU32("q_len", 8), Binds("o", "out")), (Grid{8, 1, 1})));
  }
  const StepRecord record = run(test::shapeCall(prefillShape(1, 1, 8, 4096)));
  EXPECT_TRUE(record.plan.prefillVariant.split);
  ASSERT_EQ(workspace.requests().size(), 2u);
  EXPECT_EQ(workspace.requests()[0].dims, (std::vector<std::int64_t>{1, 1, 8, 4, 128}));
}

TEST_F(StepMockTest, DisablePrefillSplitKRecordsOnePrefillKernel) {
  pretend("lavapipe", AttentionOptions::fromEnvironment({{"FOUNDRY_DISABLE_FA_PREFILL_SPLITK", "1"}}));
  EXPECT_CALL(dispatcher,
              dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "CausalStage", "SdpaPrefillStage")),
                       AllOf(PushU32("n_splits", 1), PushU32("kv_chunk", 4096), Binds("o", "out")), (Grid{1, 1, 1})));
  const StepRecord record = run(test::shapeCall(prefillShape(1, 1, 8, 4096)));
  EXPECT_EQ(record.kernels.size(), 1u);
  EXPECT_THAT(workspace.requests(), IsEmpty());
}

TEST_F(StepMockTest, AKnobOverrideBeatsTheHeuristicInWhatIsRecorded) {
  // The heuristic wants 32 splits here (see LongDecodeOnH200...); the knob asks for 4.
  pretend("h200", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}}));
  EXPECT_CALL(dispatcher, dispatch(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")),
                                   AllOf(PushU32("n_splits", 4), PushU32("kv_chunk", 2048)), (Grid{4, 8, 1})));
  run(test::shapeCall(decodeShape(1, 32, 8, 8192)));
}

TEST_F(StepMockTest, ScalarKnobOnH200RecordsTheScalarKernel) {
  pretend("h200", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCALAR", "1"}}));
  EXPECT_CALL(dispatcher, dispatch(KernelNamed(HasSubstr("_scalar_")), _, (Grid{1, 8, 1})));
  run(test::shapeCall(decodeShape(1, 32, 8, 128)));
}

TEST_F(StepMockTest, SmallGpuWithoutFp16RecordsKernelsWithNoHalfValuesInSharedMemory) {
  pretend("small");
  const auto noHalfShared =
      ::testing::Field(&KernelSource::glsl, Not(HasSubstr("GL_EXT_shader_explicit_arithmetic_types_float16")));
  EXPECT_CALL(dispatcher,
              dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "FlashDecodeStage")), noHalfShared), _,
                       (Grid{1, 8, 1})));
  run(test::shapeCall(decodeShape(1, 32, 8, 128)));
  EXPECT_CALL(dispatcher, dispatch(AllOf(KernelStages(ElementsAre("HeadLayoutStage", "KvAccessStage", "CausalStage", "SdpaPrefillStage")),
                                         KernelNamed(HasSubstr("_f32tiles")), noHalfShared),
                                   _, _));
  run(test::shapeCall(prefillShape(8, 8, 256, 256, 64)));
}

// ---- refusals: nothing is recorded ----------------------------------------------------------------

TEST_F(StepMockTest, DisableFaIsAnErrorPointingAtTheReferenceStepAndRecordsNothing) {
  pretend("h200", AttentionOptions::fromEnvironment({{"FOUNDRY_DISABLE_FA", "1"}}));
  expectRefused<UnsupportedError>(test::shapeCall(decodeShape(1, 32, 8, 8192)),
                                  AllOf(HasSubstr("FOUNDRY_DISABLE_FA=1"), HasSubstr("SdpaReferenceStep")));
  EXPECT_THROW(step().kernelsFor(test::shapeCall(decodeShape(1, 32, 8, 8192))), UnsupportedError);
}

TEST_F(StepMockTest, ForceMaterializedIsAnErrorPointingAtTheReferenceStepAndRecordsNothing) {
  pretend("lavapipe", AttentionOptions::fromEnvironment({{"FOUNDRY_SDPA_FORCE_MATERIALIZED", "1"}}));
  expectRefused<UnsupportedError>(
      test::shapeCall(prefillShape(8, 8, 64, 128)),
      AllOf(HasSubstr("FOUNDRY_SDPA_FORCE_MATERIALIZED=1"), HasSubstr("SdpaReferenceStep")));
}

TEST_F(StepMockTest, HeadDimsBeyondTheDeviceAreUnsupportedBeforeAnyDispatch) {
  // An f32 K/V tile of 1024 dims in the narrowest prefill shape (4 keys) does not fit lavapipe's
  // 32 KiB of shared memory: unsupported, naming head_dim and the path that takes it.
  pretend("lavapipe");
  CallShape wide = prefillShape(8, 8, 64, 128, 1024);
  wide.dtype = DType::F32;
  expectRefused<UnsupportedError>(test::shapeCall(wide),
                                  AllOf(HasSubstr("head_dim 1024"), HasSubstr("shared memory"), HasSubstr("SdpaReferenceStep")));
}

TEST_F(StepMockTest, KnobValuesTheDeviceCannotHonourRecordNothing) {
  pretend("lavapipe", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "16"}}));
  expectRefused<UserError>(test::shapeCall(decodeShape(1, 32, 8, 1024)), HasSubstr("FOUNDRY_FA_DECODE_KEYS_PER_WARP"));
  pretend("lavapipe", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}}));
  expectRefused<UnsupportedError>(test::shapeCall(prefillShape(8, 8, 64, 128)), HasSubstr("FOUNDRY_FA_PREFILL_COOPMAT=1"));
  pretend("small", AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TG_OUT", "half"}}));
  expectRefused<UserError>(test::shapeCall(decodeShape(1, 32, 8, 1024)), HasSubstr("FOUNDRY_FA_DECODE_TG_OUT"));
}

TEST_F(StepMockTest, PrefillWithoutSubgroupArithmeticRecordsNothing) {
  DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  lavapipe.subgroupArithmetic = false;
  pretend(lavapipe);
  expectRefused<UnsupportedError>(test::shapeCall(prefillShape(8, 8, 64, 128)),
                                  AllOf(HasSubstr("subgroup arithmetic"), HasSubstr("SdpaReferenceStep")));
}

TEST_F(StepMockTest, F16OnADeviceWithout16BitStorageIsUnsupported) {
  DeviceInfo h200 = parseDevicePreset("h200");
  h200.storage16Bit = false;
  pretend(h200);
  expectRefused<UnsupportedError>(test::shapeCall(decodeShape(1, 32, 8, 1024)), HasSubstr("use f32"));
}

struct BadCall {
  const char* name;
  std::function<void(AttentionCall&)> breakIt;
  const char* field;
  std::vector<std::string> message;
};

void PrintTo(const BadCall& b, std::ostream* os) {
  *os << b.name;
}

class RejectedCall : public StepMockTest, public ::testing::WithParamInterface<BadCall> {};

TEST_P(RejectedCall, IsAUserErrorNamingTheFieldAndRecordsNothing) {
  const BadCall& b = GetParam();
  for (const char* preset : {"h200", "lavapipe"}) {
    SCOPED_TRACE(preset);
    pretend(preset);
    AttentionCall call = test::shapeCall(prefillShape(32, 8, 16, 1024));
    b.breakIt(call);
    EXPECT_CALL(dispatcher, dispatch(_, _, _)).Times(0);
    try {
      run(call);
      ADD_FAILURE() << "accepted";
    } catch (const UserError& e) {
      EXPECT_EQ(e.field(), b.field);
      for (const auto& part : b.message) EXPECT_THAT(e.what(), HasSubstr(part));
    }
    EXPECT_THAT(workspace.requests(), IsEmpty());
    EXPECT_THROW(step().plan(call), UserError);
  }
}

INSTANTIATE_TEST_SUITE_P(
    FlashAttentionStep, RejectedCall,
    ::testing::Values(
        BadCall{"MixedCacheFormats",
                [](AttentionCall& c) { c.v.dtype = DType::F32; },
                "v",
                {"mixed formats within one cache", "'v_cache' is f32", "k 'k_cache' is f16"}},
        BadCall{"NonContiguousHeadDim",
                [](AttentionCall& c) {
                  c.q.strides = {32 * 16 * 256, 16 * 256, 256, 2};
                },
                "q",
                {"contiguous in head_dim", "[131072, 4096, 256, 2]"}},
        BadCall{"KvLenBeyondCapacity",
                [](AttentionCall& c) { c.kvLen = 1025; },
                "kv_len",
                {"kv_len 1025", "capacity 1024"}},
        BadCall{"HeadsNotAMultipleOfKvHeads",
                [](AttentionCall& c) {
                  c.k = Tensor::describe("k_cache", DType::F16, {1, 5, 1024, 128}, Layout::KvCache);
                  c.v = Tensor::describe("v_cache", DType::F16, {1, 5, 1024, 128}, Layout::KvCache);
                },
                "n_heads",
                {"n_heads (32)", "n_kv_heads (5)"}},
        BadCall{"QueriesBeyondTheCache", [](AttentionCall& c) { c.kvLen = 8; }, "q_len", {"q_len 16 exceeds kv_len 8"}},
        BadCall{"CacheNotTaggedAsKvCache",
                [](AttentionCall& c) { c.k.layout = Layout::HeadMajor; },
                "k",
                {"layout head-major", "kv-cache"}},
        BadCall{"OutputOfTheWrongShape",
                [](AttentionCall& c) {
                  c.o = Tensor::describe("out", DType::F16, {1, 32, 15, 128}, Layout::HeadMajor);
                },
                "o",
                {"[1, 32, 15, 128]", "[1, 32, 16, 128]"}},
        BadCall{"FusedRopeOnPrefill",
                [](AttentionCall& c) { c = test::withRope(c, 128, 0); },
                "rope",
                {"decode feature", "RopeStep"}}),
    [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace foundry
