// Views of one buffer that steps read and write: which share an element (foundry/Tensor.h viewsOverlap,
// selfOverlapping), what a step refuses for it whatever its plan, and that views whose elements are
// apart, though their bytes interleave, run and are right (a trial's findings: an output whose rows
// overlapped ran and was wrong; q and o as the column halves of one activation ran at batch 1 and were
// refused at batch 2; K and V pages alternating in one pool could be read but not appended to).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/DType.h"
#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/Workspace.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FusedAttention.h"
#include "foundry/steps/MergeStep.h"
#include "foundry/steps/OutputComparison.h"
#include "foundry/steps/PagedKv.h"
#include "foundry/steps/RopeStep.h"
#include "support/TestRuntime.h"
#include "support/UserErrorText.h"

namespace foundry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using test::userError;

/// A view of `t`'s buffer with other dims, strides and offset.
Tensor view(const Tensor& t, std::string name, std::vector<std::int64_t> dims, std::vector<std::int64_t> strides,
            std::uint64_t offset = 0, Layout layout = Layout::TokenMajor) {
  Tensor v = t;
  v.name = std::move(name);
  v.dims = std::move(dims);
  v.strides = std::move(strides);
  v.offset = offset;
  v.layout = layout;
  return v;
}

TEST(Views, OverlapIsExactForViewsOfOneGridAndByBytesOtherwise) {
  Runtime& rt = test::runtime();
  const Tensor buf = rt.allocate("act", DType::F16, {2, 1, 512});
  // q and o as the column halves of [B 2, S 1, 2 x 4 heads x 64]: their bytes interleave, their elements do not.
  const Tensor q = view(buf, "q", {2, 1, 4, 64}, {512, 512, 64, 1});
  EXPECT_FALSE(viewsOverlap(q, view(buf, "o", {2, 1, 4, 64}, {512, 512, 64, 1}, 256)));
  EXPECT_TRUE(viewsOverlap(q, view(buf, "o", {2, 1, 4, 64}, {512, 512, 64, 1}, 128)));  // heads 2-3 of q
  EXPECT_TRUE(viewsOverlap(q, view(buf, "o", {2, 1, 4, 64}, {512, 512, 64, 1}, 512 + 64)));  // batch 1's head 1
  EXPECT_TRUE(viewsOverlap(q, q));
  // Other grids meet by their bytes: a packed [2, 256] view over the same bytes as q.
  EXPECT_TRUE(viewsOverlap(q, view(buf, "flat", {2, 256}, {512, 1}, 256)));
  EXPECT_FALSE(viewsOverlap(q, rt.allocate("elsewhere", DType::F16, {2, 1, 4, 64})));
  // K and V pages alternating in one pool [pages 6, K|V, 16 rows, 2 heads, 64].
  const Tensor pool = rt.allocate("kv_pool", DType::F16, {6, 2, 16, 2, 64});
  const Tensor k = view(pool, "k", {6, 16, 2, 64}, {4096, 128, 64, 1});
  EXPECT_FALSE(viewsOverlap(k, view(pool, "v", {6, 16, 2, 64}, {4096, 128, 64, 1}, 2048)));
  EXPECT_TRUE(viewsOverlap(k, view(pool, "v", {6, 16, 2, 64}, {4096, 128, 64, 1}, 4096 + 64)));

  EXPECT_FALSE(selfOverlapping(q));
  EXPECT_FALSE(selfOverlapping(view(buf, "padded", {1, 4, 1, 64}, {320, 80, 80, 1})));  // rows 80 apart, 64 wide
  EXPECT_TRUE(selfOverlapping(view(buf, "narrow", {1, 1, 4, 64}, {128, 128, 32, 1})));   // heads 32 apart, 64 wide
  EXPECT_TRUE(selfOverlapping(view(buf, "broadcast", {2, 64}, {0, 1})));
  EXPECT_FALSE(selfOverlapping(view(buf, "one", {1, 64}, {0, 1})));  // a dim of 1 names no second position
}

/// The default plans, or Split-K forced for decode and prefill (a reduce kernel writes the output).
AttentionOptions plans(bool split) {
  AttentionOptions o;
  if (split) o.faDecodeSplitK = o.faPrefillSplitK = 3;
  return o;
}

/// A call of 4 query heads over 2 KV heads, D 64, f16, kv_len 40 of 64, on random values.
AttentionCall smallCall(Runtime& rt, std::uint32_t batch) {
  AttentionCall c;
  c.k = rt.allocate("k", DType::F16, {batch, 2, 64, 64}, Layout::KvCache);
  c.v = rt.allocate("v", DType::F16, {batch, 2, 64, 64}, Layout::KvCache);
  rt.upload(c.k, test::randomVector(static_cast<std::size_t>(c.k.numel()), 2));
  rt.upload(c.v, test::randomVector(static_cast<std::size_t>(c.v.numel()), 3));
  c.kvLen = 40;
  return c;
}

TEST(Views, QueriesAndOutputsAsColumnHalvesOfOneActivationRunUnderEveryPlan) {
  Runtime& rt = test::runtime();
  for (const bool split : {false, true}) {
    FusedAttention fa(rt, plans(split));
    for (const std::uint32_t batch : {1u, 2u}) {
      for (const std::uint32_t tokens : {1u, 9u}) {
        const std::int64_t w = 2 * 4 * 64;  // a token's row: q's heads, then o's
        const Tensor act = rt.allocate("act", DType::F16, {batch, tokens, w});
        AttentionCall c = smallCall(rt, batch);
        c.q = view(act, "q", {batch, tokens, 4, 64}, {tokens * w, w, 64, 1});
        c.o = view(act, "o", {batch, tokens, 4, 64}, {tokens * w, w, 64, 1}, 4 * 64);
        std::vector<float> before = test::randomVector(static_cast<std::size_t>(act.numel()), 1);
        for (float& x : before) x = halfToFloat(floatToHalf(x));  // as the f16 buffer holds them
        for (std::size_t r = 0; r < before.size() / w; ++r) {  // o's half poisoned
          for (std::int64_t j = 4 * 64; j < w; ++j) before[r * w + j] = std::nanf("");
        }
        rt.upload(act, before);
        ASSERT_NO_THROW(fa.run(c)) << "split " << split << " batch " << batch << " tokens " << tokens;
        const std::vector<float> after = rt.download(act);
        std::vector<float> q, got;
        for (std::size_t r = 0; r < after.size() / w; ++r) {
          q.insert(q.end(), before.begin() + r * w, before.begin() + r * w + 4 * 64);
          got.insert(got.end(), after.begin() + r * w + 4 * 64, after.begin() + (r + 1) * w);
          EXPECT_TRUE(std::equal(before.begin() + r * w, before.begin() + r * w + 4 * 64, after.begin() + r * w))
              << "q's half of row " << r << " was written";
        }
        const auto want = cpuAttention(describeCall(c), q, rt.download(c.k), rt.download(c.v));
        EXPECT_LT(compareOutputs(got, want).maxRel, 3e-3) << "split " << split << " batch " << batch << " tokens " << tokens;
      }
    }
  }
}

TEST(Views, AnOutputOverItsInputsIsRefusedWhateverThePlan) {
  Runtime& rt = test::runtime();
  for (const bool split : {false, true}) {
    FusedAttention fa(rt, plans(split));
    AttentionCall c = smallCall(rt, 1);
    c.q = rt.allocate("q", DType::F16, {1, 4, 9, 64}, Layout::HeadMajor);
    c.o = c.q;  // in place
    EXPECT_THAT(userError([&] { fa.run(c); }), AllOf(StartsWith("o: "), HasSubstr("'q' shares elements with q 'q'")))
        << "split " << split;
    c.o = view(c.k, "o_in_k", {1, 4, 9, 64}, {2304, 576, 64, 1}, 0, Layout::HeadMajor);
    EXPECT_THAT(userError([&] { fa.run(c); }), HasSubstr("'o_in_k' shares elements with k 'k'")) << "split " << split;
  }
}

TEST(Views, OutputsThatNameAnElementTwiceAreRefused) {
  Runtime& rt = test::runtime();
  FusedAttention fa(rt);
  AttentionCall c = smallCall(rt, 1);
  c.q = rt.allocate("q", DType::F16, {1, 4, 1, 64}, Layout::HeadMajor);
  const Tensor buf = rt.allocate("o_buffer", DType::F16, {1, 128});
  c.o = view(buf, "o_narrow", {1, 1, 4, 64}, {128, 128, 32, 1});  // heads 32 apart, 64 wide
  EXPECT_THAT(userError([&] { fa.run(c); }),
              AllOf(StartsWith("o: "), HasSubstr("'o_narrow'"), HasSubstr("names one element at two positions")));

  const Tensor part = rt.allocate("part", DType::F16, {1, 4, 1, 64}, Layout::HeadMajor);
  const Tensor lse = rt.allocate("part_lse", DType::F32, {1, 4, 1});
  MergeStep merge(rt.info(), rt.snippets());
  MergeCall m;
  m.parts = {{part, lse}};
  m.o = view(buf, "merged", {1, 4, 1, 64}, {128, 32, 64, 1}, 0, Layout::HeadMajor);
  EXPECT_THAT(userError([&] { merge.validate(m); }), AllOf(StartsWith("o: "), HasSubstr("names one element")));
  m.o = part;  // over a part it reads
  EXPECT_THAT(userError([&] { merge.validate(m); }), HasSubstr("'part' shares elements with parts[0].o 'part'"));

  const Tensor kNew = rt.allocate("k_new", DType::F16, {1, 2, 1, 64}, Layout::HeadMajor);
  const Tensor vNew = rt.allocate("v_new", DType::F16, {1, 2, 1, 64}, Layout::HeadMajor);
  const Tensor cache = rt.allocate("cache", DType::F16, {1, 1, 64, 64}, Layout::KvCache);
  const Tensor kCache = view(cache, "k_cache", {1, 2, 64, 64}, {4096, 64, 64, 1}, 0, Layout::KvCache);  // heads a row apart
  const Tensor vCache = rt.allocate("v_cache", DType::F16, {1, 2, 64, 64}, Layout::KvCache);
  KvAppendStep append(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace ws(rt);
  StepContext ctx{*dispatcher, ws};
  EXPECT_THAT(userError([&] { append.run(ctx, kNew, vNew, kCache, vCache, 0, std::nullopt); }),
              AllOf(StartsWith("k_cache: "), HasSubstr("names one element at two positions")));
  EXPECT_THAT(userError([&] { append.run(ctx, kNew, vNew, vCache, vCache, 0, std::nullopt); }),
              HasSubstr("v_cache: 'v_cache' shares elements with k_cache 'v_cache'"));
  EXPECT_EQ(dispatcher->pending(), 0u);
}

TEST(Views, KAndVPagesAlternatingInOnePoolAreAppendedToAndRead) {
  Runtime& rt = test::runtime();
  const std::int64_t pages = 6, rows = 16, heads = 2, dim = 64, page = rows * heads * dim;
  const Tensor pool = rt.allocate("kv_pool", DType::F16, {pages, 2, rows, heads, dim});
  const std::vector<float> start = test::randomVector(static_cast<std::size_t>(pool.numel()), 5);
  rt.upload(pool, start);
  const Tensor k = view(pool, "k_pages", {pages, rows, heads, dim}, {2 * page, heads * dim, dim, 1});
  const Tensor v = view(pool, "v_pages", {pages, rows, heads, dim}, {2 * page, heads * dim, dim, 1}, page);
  PagedKv paged;
  paged.table = {4, 1, 3, 0, 2, 5};  // 2 sequences of 3 pages
  paged.blockTable = rt.allocate("block_table", DType::U32, {2, 3});
  rt.upload(paged.blockTable, std::span<const std::uint32_t>(paged.table));
  const Tensor kNew = rt.allocate("k_new", DType::F16, {2, 1, heads, dim}, Layout::TokenMajor);
  const Tensor vNew = rt.allocate("v_new", DType::F16, {2, 1, heads, dim}, Layout::TokenMajor);
  const std::vector<float> kRows = test::randomVector(2 * heads * dim, 6), vRows = test::randomVector(2 * heads * dim, 7);
  rt.upload(kNew, kRows);
  rt.upload(vNew, vRows);
  KvAppendStep append(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace ws(rt);
  StepContext ctx{*dispatcher, ws, &rt};
  ASSERT_NO_THROW(append.run(ctx, kNew, vNew, k, v, 40, std::nullopt, &paged));
  dispatcher->submit();
  // Position 40 is row 8 of each sequence's third page: pages 3 and 5.
  std::vector<float> want;
  for (const float x : start) want.push_back(halfToFloat(floatToHalf(x)));
  for (std::int64_t b = 0; b < 2; ++b) {
    const std::int64_t p = paged.table[b * 3 + 2];
    for (std::int64_t i = 0; i < heads * dim; ++i) {
      const auto at = static_cast<std::size_t>(2 * p * page + 8 * heads * dim + i);
      want[at] = halfToFloat(floatToHalf(kRows[b * heads * dim + i]));
      want[at + page] = halfToFloat(floatToHalf(vRows[b * heads * dim + i]));
    }
  }
  EXPECT_EQ(rt.download(pool), want);
}

}  // namespace
}  // namespace foundry
