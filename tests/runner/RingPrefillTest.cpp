// Ring prefill over MPI ranks, run under `mpirun -np 2` and `-np 3` (ctest): one sequence's queries,
// keys and values divided by positions (evenly with a remainder, causally balanced, and with a rank
// that holds nothing), key/value blocks passed around the ring, each rank's rows equal to the float64
// reference over the whole sequence and to one device's flash prefill within the dtype bound, LSE
// included. Causal and bidirectional, GQA and MHA, f16, bf16 and f32. Under the causal mask the last
// rank's block is seen by nobody after it and is never sent; a rank with no queries passes blocks on.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "foundry/Runtime.h"
#include "foundry/runner/RingPrefill.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/OutputComparison.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "runner/MpiTestMain.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

enum class Split { Even, Balanced, EmptyRank };

struct RingCase {
  std::uint32_t heads = 8, kvHeads = 2, headDim = 64;
  std::uint32_t total = 100;  ///< positions of the sequence
  Split split = Split::Even;
  bool causal = true;
  DType dtype = DType::F16;
  std::uint32_t spare = 0;  ///< rows past the shard in each rank's caches (a decode cache's room)
  std::string name;
};

std::vector<RingCase> cases() {
  return {
      {.name = "even_causal_f16"},
      {.total = 61, .spare = 7, .name = "in_decode_caches_f16"},
      {.total = 200, .split = Split::Balanced, .dtype = DType::F32, .name = "balanced_causal_f32"},
      {.heads = 4, .kvHeads = 4, .headDim = 128, .total = 57, .split = Split::EmptyRank, .dtype = DType::BF16,
       .name = "empty_rank_causal_bf16"},
      // 100 over 3 ranks is 34/33/33: queries of one block over a shorter one.
      {.causal = false, .name = "even_bidirectional_f16"},
      {.total = 57, .split = Split::EmptyRank, .causal = false, .dtype = DType::F32,
       .name = "empty_rank_bidirectional_f32"},
  };
}

double boundOf(DType t) { return t == DType::F32 ? 1e-4 : t == DType::BF16 ? 1.2e-2 : 3e-3; }

KvShards shardsOf(const RingCase& c, std::uint32_t ranks) {
  if (c.split == Split::Balanced) return KvShards::causalBalanced(c.total, ranks);
  if (c.split == Split::EmptyRank && ranks > 1) {
    // Rank 0 holds nothing with 2 ranks (the first block has no keys), rank 1 with more (it only
    // passes rank 0's block on).
    const std::uint32_t empty = ranks == 2 ? 0 : 1;
    std::vector<std::uint32_t> sizes(ranks, 0);
    for (std::uint32_t r = 0, i = 0; r < ranks; ++r) {
      if (r == empty) continue;
      sizes[r] = c.total / (ranks - 1) + (i++ < c.total % (ranks - 1) ? 1 : 0);
    }
    return KvShards::ofSizes(sizes);
  }
  return KvShards::even(c.total, ranks);
}

/// Rows [from, from + n) of dim 2 of a host [1, H, S, D] array.
std::vector<float> rowsOf(const std::vector<float>& all, std::uint32_t heads, std::uint32_t s, std::uint32_t d,
                          std::uint32_t from, std::uint32_t n) {
  std::vector<float> out;
  for (std::uint32_t h = 0; h < heads; ++h) {
    const auto at = all.begin() + static_cast<std::ptrdiff_t>((std::size_t(h) * s + from) * d);
    out.insert(out.end(), at, at + static_cast<std::ptrdiff_t>(std::size_t(n) * d));
  }
  return out;
}

template <typename T>
std::vector<T> rowsOf(const std::vector<T>& all, std::uint32_t heads, std::uint32_t s, std::uint32_t from,
                      std::uint32_t n) {
  std::vector<T> out;
  for (std::uint32_t h = 0; h < heads; ++h) {
    const auto at = all.begin() + static_cast<std::ptrdiff_t>(std::size_t(h) * s + from);
    out.insert(out.end(), at, at + n);
  }
  return out;
}

class RingPrefillRanks : public ::testing::TestWithParam<RingCase> {};

TEST_P(RingPrefillRanks, EachRanksRowsEqualTheWholeSequencesAttention) {
  const RingCase& c = GetParam();
  Runtime& rt = *gRuntime;
  MpiCommunicator& comm = *gComm;
  const std::uint64_t validationBefore = rt.device().instance().validationErrors();
  const KvShards shards = shardsOf(c, comm.size());
  const KvShard mine = shards.shard(comm.rank());
  const std::uint32_t rows = std::max(mine.size(), 1u);
  ASSERT_TRUE(c.spare == 0 || mine.size() > 0) << "spare rows are given to ranks with positions";

  // The whole sequence, the same on every rank, rounded to the dtype on the device.
  AttentionProblem p;
  p.batch = 1, p.nHeads = c.heads, p.nKvHeads = c.kvHeads, p.qLen = c.total, p.headDim = c.headDim;
  p.kvCapacity = c.total, p.kvLen = c.total, p.dtype = c.dtype, p.causal = c.causal;
  AttentionCall whole;
  whole.q = rt.allocate("q_all", c.dtype, {1, c.heads, c.total, c.headDim}, Layout::HeadMajor);
  whole.k = rt.allocate("k_all", c.dtype, p.kvDims(), Layout::KvCache);
  whole.v = rt.allocate("v_all", c.dtype, p.kvDims(), Layout::KvCache);
  rt.upload(whole.q, randomVector(std::size_t(c.heads) * c.total * c.headDim, 21 + c.total));
  rt.upload(whole.k, randomVector(std::size_t(c.kvHeads) * c.total * c.headDim, 22 + c.total));
  rt.upload(whole.v, randomVector(std::size_t(c.kvHeads) * c.total * c.headDim, 23 + c.total));
  const auto qAll = rt.download(whole.q), kAll = rt.download(whole.k), vAll = rt.download(whole.v);
  whole.o = rt.allocate("o_all", c.dtype, {1, c.heads, c.total, c.headDim}, Layout::HeadMajor);
  whole.kvLen = c.total;
  whole.causal = c.causal;
  {
    auto d = rt.dispatcher();
    DeviceWorkspace w(rt);
    StepContext ctx{*d, w, &rt};
    FlashAttentionStep(rt.info(), rt.snippets(), AttentionOptions{}).run(ctx, whole);
    d->submit();
  }

  // This rank's queries, keys and values.
  AttentionCall call;
  call.causal = c.causal;
  call.q = rt.allocate("q_mine", c.dtype, {1, c.heads, rows, c.headDim}, Layout::HeadMajor);
  call.k = rt.allocate("k_mine", c.dtype, {1, c.kvHeads, rows + c.spare, c.headDim}, Layout::KvCache);
  call.v = rt.allocate("v_mine", c.dtype, {1, c.kvHeads, rows + c.spare, c.headDim}, Layout::KvCache);
  if (mine.size() > 0) {
    rt.upload(call.q, rowsOf(qAll, c.heads, c.total, c.headDim, mine.begin, rows));
    // Each KV head's rows, then its spare rows (random: a block that took them would not match).
    for (const auto& [t, all] : {std::pair{&call.k, &kAll}, std::pair{&call.v, &vAll}}) {
      const auto spare = randomVector(std::size_t(c.spare + 1) * c.headDim, 31);
      std::vector<float> host;
      for (std::uint32_t h = 0; h < c.kvHeads; ++h) {
        const auto at = all->begin() + static_cast<std::ptrdiff_t>((std::size_t(h) * c.total + mine.begin) * c.headDim);
        host.insert(host.end(), at, at + static_cast<std::ptrdiff_t>(std::size_t(rows) * c.headDim));
        host.insert(host.end(), spare.begin(), spare.begin() + static_cast<std::ptrdiff_t>(std::size_t(c.spare) * c.headDim));
      }
      rt.upload(*t, host);
    }
  } else {
    for (const Tensor* t : {&call.q, &call.k, &call.v}) rt.upload(*t, randomVector(static_cast<std::size_t>(t->numel()), 5));
  }
  call.o = rt.allocate("o_mine", c.dtype, {1, c.heads, rows, c.headDim}, Layout::HeadMajor);
  call.lse = rt.allocate("lse_mine", DType::F32, {1, c.heads, rows});
  rt.poison(call.o);
  rt.poison(*call.lse);

  RingPrefill ring(rt, comm, shards, AttentionOptions{});
  const RingPrefillReport report = ring.run(call);

  ASSERT_EQ(report.ranks.size(), comm.size());
  std::uint32_t queries = 0;
  for (const auto& r : report.ranks) queries += r.queries;
  EXPECT_EQ(queries, c.total) << "every position is one rank's query";
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    std::uint32_t seen = 0;
    for (std::uint32_t j = 0; j < comm.size(); ++j) {
      seen += shards.shard(r).size() > 0 && shards.shard(j).size() > 0 && (!c.causal || j <= r);
    }
    EXPECT_EQ(report.ranks[r].blocks, seen) << "rank " << r << " attends exactly the blocks it sees";
  }
  if (c.causal) {
    EXPECT_EQ(report.ranks.back().bytesSent, 0u) << "nobody after the last rank sees its block";
  }

  const auto got = rt.download(call.o);
  const auto lseGot = rt.download(*call.lse);
  if (mine.size() == 0) {
    for (float x : got) ASSERT_TRUE(std::isnan(x)) << "a rank with no queries writes no output";
  } else {
    std::vector<double> lseAll;
    const auto want = cpuAttention(p, qAll, kAll, vAll, &lseAll);
    const double bound = boundOf(c.dtype);
    const ErrorStats vsRef = compareOutputs(got, rowsOf(want, c.heads, c.total * c.headDim,
                                                        mine.begin * c.headDim, mine.size() * c.headDim));
    EXPECT_TRUE(vsRef.passes(bound)) << "rank " << comm.rank() << " vs the reference: relative " << vsRef.maxRel;
    const auto single = rt.download(whole.o);
    const std::vector<double> singleRows =
        rowsOf(std::vector<double>(single.begin(), single.end()), c.heads, c.total * c.headDim,
               mine.begin * c.headDim, mine.size() * c.headDim);
    const ErrorStats vsSingle = compareOutputs(got, singleRows);
    EXPECT_TRUE(vsSingle.passes(bound)) << "rank " << comm.rank() << " vs one device: relative " << vsSingle.maxRel;
    const auto lseWant = rowsOf(lseAll, c.heads, c.total, mine.begin, mine.size());
    for (std::size_t i = 0; i < lseGot.size(); ++i) {
      ASSERT_NEAR(lseGot[i], lseWant[i], 10 * bound) << "rank " << comm.rank() << " row " << i;
    }
  }
  if (comm.rank() == 0) {
    std::string line = fmt::format("{} over {} ranks ({}):", c.name, comm.size(), shards.describe());
    for (std::uint32_t r = 0; r < comm.size(); ++r) {
      const auto& t = report.ranks[r];
      line += fmt::format(" rank {} {} queries {} blocks {:.0f} us {} B;", r, t.queries, t.blocks, t.attentionMicros,
                          t.bytesSent);
    }
    std::printf("%s %llu bytes moved\n", line.c_str(), static_cast<unsigned long long>(report.bytesMoved()));
  }
  EXPECT_EQ(rt.device().instance().validationErrors(), validationBefore)
      << rt.device().instance().lastValidationError();
}

INSTANTIATE_TEST_SUITE_P(Shards, RingPrefillRanks, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<RingCase>& i) { return i.param.name; });

}  // namespace
}  // namespace foundry::test
