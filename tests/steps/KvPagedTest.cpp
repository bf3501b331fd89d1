// Paged KV caches against the CPU float64 reference: pools of pages with each sequence's pages in
// reverse order and a spare page of NaN, page sizes that do not divide the lengths, sequences of 1, 17
// and 4097 keys in one batch, every format (f16, bf16, f32, int8, q8_0) and both page layouts, through
// every kernel variant (subgroup decode at each load width, scalar, Split-K with and without a reduce
// kernel, fused RoPE, subgroup prefill continuing a paged prefix, Split-K prefill, the materialised
// reference). Appends into pages are checked against appends into a contiguous cache, bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/Runtime.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

using Knobs = std::vector<std::pair<std::string, std::string>>;

struct PagedCase {
  AttentionCase c;
  Knobs knobs;
  std::string label;
};

void PrintTo(const PagedCase& f, std::ostream* os) { *os << f.label << "_" << f.c.name(); }

PagedCase paged(std::string label, std::uint32_t pageSize, std::uint32_t qLen, std::uint32_t kvLen, DType kv,
                Knobs knobs = {}, bool tokenMajor = false) {
  PagedCase f;
  f.c = attentionCase(2, 8, 2, qLen, kvLen, 64, kv);
  f.c.pageSize = pageSize;
  f.c.tokenMajorCache = tokenMajor;
  if (quantized(kv)) f.c.qType = f.c.oType = DType::F16;
  f.knobs = std::move(knobs);
  f.label = std::move(label);
  return f;
}

// Three sequences of 1, 17 and 4097 keys (or at least q_len) in one batch.
PagedCase ragged(PagedCase f) {
  f.c.batch = 3;
  f.c.kvLen = 4097;
  f.c.modifiers = {keyLengths({std::max(1u, f.c.qLen), std::max(17u, f.c.qLen), 4097})};
  f.label += "_ragged";
  return f;
}

PagedCase withHeadDim(PagedCase f, std::uint32_t headDim) {
  f.c.headDim = headDim;
  return f;
}

PagedCase withLse(PagedCase f) {
  f.c.lse = true;
  f.label += "_lse";
  return f;
}

std::string pagedName(const ::testing::TestParamInfo<PagedCase>& info) {
  return gtestSafe(info.param.label + "_" + info.param.c.name());
}

class KvPagedParity : public ::testing::TestWithParam<PagedCase> {};

TEST_P(KvPagedParity, FlashMatchesCpuReference) {
  const PagedCase& f = GetParam();
  const AttentionResult r = runFlash(f.c, AttentionOptions::fromEnvironment({f.knobs.begin(), f.knobs.end()}));
  EXPECT_TRUE(matchesReference(f.c, r)) << r.record.plan.describe();
  if (quantized(f.c.dtype)) {
    EXPECT_LE(r.errorUnquantized.maxRel, quantizationBound(f.c.dtype)) << "against the values before quantization";
  }
  // The attention kernel that ran is the paged one (a Split-K reduce reads no cache).
  const std::string paged = fmt::format("_pg{}", f.c.pageSize);
  EXPECT_TRUE(std::any_of(r.record.kernels.begin(), r.record.kernels.end(),
                          [&](const std::string& k) { return k.find(paged) != std::string::npos; }))
      << fmt::format("{}", fmt::join(r.record.kernels, ", "));
}

TEST_P(KvPagedParity, ReferenceMatchesCpuReference) {
  const PagedCase& f = GetParam();
  if (!f.knobs.empty()) GTEST_SKIP() << "the knobs choose FlashAttentionStep variants";
  if (f.c.lse) GTEST_SKIP() << "SdpaReferenceStep writes the output only";
  const AttentionResult r = runReference(f.c);
  EXPECT_TRUE(matchesReference(f.c, r));
}

constexpr DType F16 = DType::F16, BF16 = DType::BF16, F32 = DType::F32, I8 = DType::I8, Q8 = DType::Q8_0;

// kv 300 with pages of 16 and 64: the last page is partly used, the rows past it NaN.
INSTANTIATE_TEST_SUITE_P(
    Decode, KvPagedParity,
    ::testing::Values(paged("f16", 16, 1, 300, F16), paged("f16", 64, 1, 300, F16), paged("f16", 256, 1, 300, F16),
                      paged("f16_vec8", 16, 1, 300, F16, Knobs{{"FOUNDRY_FA_DECODE_VEC", "8"}}),
                      paged("f16_vec2", 16, 1, 300, F16, Knobs{{"FOUNDRY_FA_DECODE_VEC", "2"}}),
                      paged("f16_vec1", 16, 1, 300, F16, Knobs{{"FOUNDRY_FA_DECODE_VEC", "1"}}),
                      paged("f16_scalar", 16, 1, 300, F16, Knobs{{"FOUNDRY_FA_DECODE_SCALAR", "1"}}),
                      paged("f16_splitk", 64, 1, 4100, F16, Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}}),
                      paged("f16_splitk_reduce", 64, 1, 4100, F16,
                            Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}),
                      paged("bf16", 16, 1, 300, BF16), paged("f32", 32, 1, 300, F32),
                      paged("f16_kvtok", 16, 1, 300, F16, {}, true), paged("bf16_kvtok", 64, 1, 300, BF16, {}, true),
                      // D80 rows over 8 lanes as whole loads and then a word each (the Hopper D80 plan).
                      withHeadDim(paged("f16_tail", 16, 1, 300, F16, Knobs{{"FOUNDRY_FA_DECODE_TAIL_WORDS", "1"}}), 80),
                      withHeadDim(paged("bf16_kvtok_tail", 64, 1, 300, BF16,
                                        Knobs{{"FOUNDRY_FA_DECODE_TAIL_WORDS", "1"}, {"FOUNDRY_FA_DECODE_VEC", "8"}},
                                        true),
                                  80),
                      paged("int8", 32, 1, 300, I8), paged("int8", 64, 1, 300, I8),
                      paged("int8_vec16", 64, 1, 300, I8, Knobs{{"FOUNDRY_FA_DECODE_VEC", "16"}}),
                      paged("int8_scalar", 32, 1, 300, I8, Knobs{{"FOUNDRY_FA_DECODE_SCALAR", "1"}}),
                      paged("int8_kvtok", 32, 1, 300, I8, {}, true), paged("q8_0", 16, 1, 300, Q8),
                      paged("q8_0_kvtok", 16, 1, 300, Q8, {}, true), withLse(paged("f16", 16, 1, 300, F16)),
                      ragged(paged("f16", 16, 1, 0, F16)), ragged(paged("f16", 64, 1, 0, F16)),
                      ragged(paged("int8", 32, 1, 0, I8)),
                      ragged(paged("f16_splitk", 16, 1, 0, F16, Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}}))),
    pagedName);

// q_len < kv_len: a chunk of queries continuing a prefix that already sits in the pages.
INSTANTIATE_TEST_SUITE_P(
    Prefill, KvPagedParity,
    ::testing::Values(paged("f16", 16, 37, 100, F16), paged("f16", 64, 37, 300, F16),
                      paged("f16_splitk", 16, 7, 1000, F16, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}),
                      paged("bf16", 16, 37, 100, BF16), paged("f32_kvtok", 16, 37, 100, F32, {}, true),
                      paged("int8", 32, 37, 100, I8), paged("q8_0_kvtok", 16, 37, 100, Q8, {}, true),
                      withLse(paged("f16", 16, 37, 100, F16)), ragged(paged("f16", 64, 17, 0, F16))),
    pagedName);

// ---- Fused RoPE reads a paged cache like any other decode kernel.

TEST(KvPaged, FusedRopeDecodeMatchesTheReference) {
  PagedCase f = paged("f16_rope", 16, 1, 300, F16);
  RopeSpec rope;
  const AttentionResult r = runFlash(f.c, AttentionOptions(), rope);
  EXPECT_TRUE(matchesReference(f.c, r)) << r.record.plan.describe();
}

// ---- KvAppendStep writes into the pages its block table names: the same bits a contiguous cache
// gets, appended in two steps (an int8 block requantized as it grows), with every other page untouched.

struct PagedAppendCase {
  DType cache;
  std::uint32_t pageSize;
  bool tokenMajor;
  std::string name() const {
    return fmt::format("{}_pg{}{}", dtypeName(cache), pageSize, tokenMajor ? "_kvtok" : "");
  }
};

std::string appendName(const ::testing::TestParamInfo<PagedAppendCase>& param) { return param.param.name(); }

class KvPagedAppend : public ::testing::TestWithParam<PagedAppendCase> {};

TEST_P(KvPagedAppend, WritesTheSameRowsAsAContiguousCache) {
  const PagedAppendCase& a = GetParam();
  Runtime& rt = runtime();
  const std::uint32_t batch = 2, heads = 2, dim = 64, capacity = 100;
  const std::uint32_t maxPages = (capacity + a.pageSize - 1) / a.pageSize, pages = batch * maxPages + 1;
  const Layout layout = a.tokenMajor ? Layout::TokenMajor : Layout::KvCache;
  auto cacheDims = [&](std::uint32_t seqs, std::uint32_t rows) -> std::vector<std::int64_t> {
    if (a.tokenMajor) return {seqs, rows, heads, dim};
    return {seqs, heads, rows, dim};
  };
  Tensor flat[2], pool[2];
  for (int i = 0; i < 2; ++i) {
    flat[i] = rt.allocate(i ? "v_flat" : "k_flat", a.cache, cacheDims(batch, capacity), layout);
    pool[i] = rt.allocate(i ? "v_pool" : "k_pool", a.cache, cacheDims(pages, a.pageSize), layout);
    // Pages no append touches stay NaN; the flat cache starts the same everywhere it is compared.
    rt.upload(pool[i], std::vector<float>(pool[i].numel(), std::numeric_limits<float>::quiet_NaN()));
    rt.upload(flat[i], std::vector<float>(flat[i].numel(), 0.0f));
  }
  std::vector<std::uint32_t> table;
  for (std::uint32_t i = 0; i < batch * maxPages; ++i) table.push_back(pages - 1 - i);
  const Tensor tableTensor = rt.allocate("block_table", DType::U32, {batch, maxPages});
  rt.upload(tableTensor, std::span<const std::uint32_t>(table));
  const PagedKv pagedKv{tableTensor, table};

  KvAppendStep step(rt.info(), rt.snippets());
  // Rows 0..40 then 41..70: the second append continues blocks and pages the first began.
  for (const auto& [pos, tokens, seed] : {std::tuple{0u, 41u, 7u}, std::tuple{41u, 30u, 8u}}) {
    const Tensor kNew = rt.allocate("k_new", DType::F16, {batch, heads, tokens, dim}, Layout::HeadMajor);
    const Tensor vNew = rt.allocate("v_new", DType::F16, {batch, heads, tokens, dim}, Layout::HeadMajor);
    rt.upload(kNew, randomVector(kNew.numel(), seed, -2.0f, 2.0f));
    rt.upload(vNew, randomVector(vNew.numel(), seed + 100, -2.0f, 2.0f));
    auto dispatcher = rt.dispatcher();
    DeviceWorkspace workspace(rt);
    StepContext ctx{*dispatcher, workspace, &rt};
    step.run(ctx, kNew, vNew, flat[0], flat[1], pos, std::nullopt);
    step.run(ctx, kNew, vNew, pool[0], pool[1], pos, std::nullopt, &pagedKv);
    dispatcher->submit();
  }
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> want = rt.download(flat[i]), got = rt.download(pool[i]);
    std::size_t bad = 0, touched = 0;
    std::vector<bool> seen(got.size() / dim, false);
    for (std::uint32_t b = 0; b < batch; ++b) {
      for (std::uint32_t h = 0; h < heads; ++h) {
        for (std::uint32_t s = 0; s < 71; ++s) {
          const std::size_t page = table[b * maxPages + s / a.pageSize], slot = s % a.pageSize;
          const std::size_t from = a.tokenMajor ? (std::size_t(b) * capacity + s) * heads + h
                                                : (std::size_t(b) * heads + h) * capacity + s;
          const std::size_t to = a.tokenMajor ? (page * a.pageSize + slot) * heads + h
                                              : (page * heads + h) * a.pageSize + slot;
          seen[to] = true;
          for (std::uint32_t d = 0; d < dim; ++d) bad += !(got[to * dim + d] == want[from * dim + d]);
        }
      }
    }
    // The spare page 0 (rows [0, heads * page_size) in either layout) is still NaN.
    if (!quantized(a.cache)) {
      for (std::size_t r = 0; r < std::size_t(heads) * a.pageSize; ++r) {
        EXPECT_FALSE(seen[r]);
        for (std::uint32_t d = 0; d < dim; ++d) touched += !std::isnan(got[r * dim + d]);
      }
    }
    EXPECT_EQ(bad, 0u) << (i ? "v" : "k");
    EXPECT_EQ(touched, 0u) << "the spare page was written";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvPagedAppend,
                         ::testing::Values(PagedAppendCase{F16, 16, false}, PagedAppendCase{F16, 16, true},
                                           PagedAppendCase{BF16, 64, false}, PagedAppendCase{F32, 32, true},
                                           PagedAppendCase{I8, 32, false}, PagedAppendCase{I8, 64, true},
                                           PagedAppendCase{Q8, 16, false}),
                         appendName);

}  // namespace
}  // namespace foundry::test
