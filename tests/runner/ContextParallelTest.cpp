// Context-parallel decode over MPI ranks, run under `mpirun -np 2` and `-np 3` (ctest): one sequence's
// KV cache sharded by positions (evenly and unevenly, with a rank that holds no key of the sequence
// yet), tokens appended to the rank that owns their position, each rank's partial merged on rank 0,
// equal to the single-device flash result and to the float64 reference within the dtype bound. GQA,
// f16 and f32. Every rank opens its device from its host-local rank, with the validation layer when
// FOUNDRY_VALIDATION=1; a validation error on any rank fails the test.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>

#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "foundry/runner/ContextParallelDecode.h"
#include "foundry/runner/RingPrefill.h"
#include "runner/MpiTestMain.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/Options.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct CpCase {
  std::uint32_t heads = 8, kvHeads = 2, headDim = 64;
  std::uint32_t capacity = 100;             ///< positions over all ranks
  std::vector<std::uint32_t> shardSizes;    ///< empty: even over the ranks (100 does not divide by 3)
  std::uint32_t prompt = 61;                ///< keys appended before the decode steps
  std::uint32_t steps = 3;                  ///< decode tokens appended and attended
  DType dtype = DType::F16;
  std::string name;
};

std::vector<CpCase> cases() {
  std::vector<CpCase> out;
  for (const DType t : {DType::F16, DType::F32}) {
    const std::string d = std::string(dtypeName(t));
    out.push_back({.dtype = t, .name = "even_" + d});
    // Uneven by hand; the last rank's shard starts at 90, past the sequence until its last steps.
    out.push_back({.capacity = 100, .shardSizes = {}, .prompt = 85, .steps = 7, .dtype = t, .name = "late_rank_" + d});
    out.push_back({.heads = 4, .kvHeads = 4, .headDim = 128, .capacity = 40, .prompt = 5, .steps = 2, .dtype = t,
                   .name = "mha_short_" + d});
  }
  return out;
}

class ContextParallel : public ::testing::TestWithParam<CpCase> {};

/// Sizes of `c`'s shards over `ranks`: as given, or the last rank's starting at 90 of 100.
KvShards shardsOf(const CpCase& c, std::uint32_t ranks) {
  if (c.name.rfind("late_rank", 0) == 0 && ranks > 1) {
    std::vector<std::uint32_t> sizes(ranks, 0);
    for (std::uint32_t r = 0; r + 1 < ranks; ++r) sizes[r] = 90 / (ranks - 1) + (r < 90 % (ranks - 1) ? 1 : 0);
    sizes[ranks - 1] = 10;
    return KvShards::ofSizes(sizes);
  }
  return KvShards::even(c.capacity, ranks);
}

// A rank's device, chosen by its place on the host, is reported as chosen there (the report said
// "default"); a device the options name is kept, with its own source.
TEST(ContextParallelRefusals, ARanksDeviceSaysWhereItCameFrom) {
  MpiCommunicator& comm = *gComm;
  const RuntimeOptions chosen = optionsForRank(RuntimeOptions{}, comm);
  EXPECT_FALSE(chosen.device.empty());
  EXPECT_EQ(chosen.sourceOf("FOUNDRY_DEVICE"), fmt::format("local rank {}", comm.localRank()));
  RuntimeOptions named;
  named.device = "0";
  EXPECT_EQ(optionsForRank(named, comm).sourceOf("FOUNDRY_DEVICE"), "default");
}

// Ranks given other shards are refused on every rank, naming the shards (they waited on each other or
// merged other ranges); so is a count that is not the ranks', on every rank alike.
TEST(ContextParallelRefusals, RanksGivenOtherShardsAreRefusedOnEveryRank) {
  Runtime& rt = *gRuntime;
  MpiCommunicator& comm = *gComm;
  const std::uint32_t last = comm.size() - 1;
  std::vector<std::uint32_t> sizes(comm.size(), 8);
  if (comm.rank() == last) sizes[last] = 9;  // the last rank alone holds one more position
  try {
    ContextParallelDecode cp(rt, comm, KvShards::ofSizes(sizes), AttentionOptions{});
    ADD_FAILURE() << "ranks with other shards made a decode";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "shards") << e.what();
  }
  try {
    RingPrefill ring(rt, comm, KvShards::even(64, comm.size() + 1), AttentionOptions{});
    ADD_FAILURE() << "shards for more ranks made a prefill";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "ranks") << e.what();
  }
}

// A decode of no key at all is refused on every rank naming kv_len (it named position 2^32 - 1).
TEST(ContextParallelRefusals, AKvLengthOf0IsNamed) {
  Runtime& rt = *gRuntime;
  MpiCommunicator& comm = *gComm;
  ContextParallelDecode cp(rt, comm, KvShards::even(8, comm.size()), AttentionOptions{});
  AttentionCall call;
  call.q = rt.allocate("q", DType::F32, {1, 2, 1, 64}, Layout::HeadMajor);
  call.o = rt.allocate("o", DType::F32, {1, 2, 1, 64}, Layout::HeadMajor);
  call.k = rt.allocate("k", DType::F32, {1, 1, 8, 64}, Layout::KvCache);
  call.v = rt.allocate("v", DType::F32, {1, 1, 8, 64}, Layout::KvCache);
  call.kvLen = 0;
  try {
    cp.decode(call);
    ADD_FAILURE() << "a decode of kv_len 0 ran";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "kv_len") << e.what();
  }
}

TEST_P(ContextParallel, DecodeEqualsTheSingleDeviceResult) {
  const CpCase& c = GetParam();
  Runtime& rt = *gRuntime;
  MpiCommunicator& comm = *gComm;
  const std::uint64_t validationBefore = rt.device().instance().validationErrors();
  const KvShards shards = shardsOf(c, comm.size());
  const KvShard mine = shards.shard(comm.rank());
  AttentionOptions options;
  options.faDecodeSplitK = 2;  // the partials of a rank are themselves split: both merges run
  ContextParallelDecode cp(rt, comm, shards, options);

  AttentionProblem p;
  p.batch = 1, p.nHeads = c.heads, p.nKvHeads = c.kvHeads, p.qLen = 1, p.headDim = c.headDim, p.dtype = c.dtype;
  p.kvCapacity = c.capacity;
  const std::uint32_t total = c.prompt + c.steps;
  // Every rank draws the same tokens; K/V rows [B, Hkv, total, D] head-major.
  const auto kHost = randomVector(std::size_t(c.kvHeads) * total * c.headDim, 11 + total);
  const auto vHost = randomVector(std::size_t(c.kvHeads) * total * c.headDim, 12 + total);
  auto tokens = [&](const std::vector<float>& host, const char* name) {
    const Tensor t = rt.allocate(name, c.dtype, {1, c.kvHeads, total, c.headDim}, Layout::HeadMajor);
    rt.upload(t, host);
    return t;
  };
  const Tensor kNew = tokens(kHost, "k_new"), vNew = tokens(vHost, "v_new");
  const std::uint32_t shardRows = std::max<std::uint32_t>(mine.size(), 1);
  const Tensor kCache = rt.allocate("k_shard", c.dtype, {1, c.kvHeads, shardRows, c.headDim}, Layout::KvCache);
  const Tensor vCache = rt.allocate("v_shard", c.dtype, {1, c.kvHeads, shardRows, c.headDim}, Layout::KvCache);
  // The whole sequence on one device: what the merge must reproduce.
  const Tensor kAll = rt.allocate("k_all", c.dtype, p.kvDims(), Layout::KvCache);
  const Tensor vAll = rt.allocate("v_all", c.dtype, p.kvDims(), Layout::KvCache);
  auto rowsOf = [](Tensor t, std::uint32_t from, std::uint32_t n) {
    t.offset += std::uint64_t(from) * t.stride(2);
    t.dims[2] = n;
    return t;
  };
  cp.append(rowsOf(kNew, 0, c.prompt), rowsOf(vNew, 0, c.prompt), kCache, vCache, 0);
  {
    auto d = rt.dispatcher();
    DeviceWorkspace w(rt);
    StepContext ctx{*d, w, &rt};
    KvAppendStep(rt.info(), rt.snippets()).run(ctx, kNew, vNew, kAll, vAll, 0, std::nullopt);
    d->submit();
  }
  FlashAttentionStep single(rt.info(), rt.snippets(), options);
  for (std::uint32_t s = 0; s < c.steps; ++s) {
    const std::uint32_t pos = c.prompt + s, kvLen = pos + 1;
    cp.append(rowsOf(kNew, pos, 1), rowsOf(vNew, pos, 1), kCache, vCache, pos);
    const auto qHost = randomVector(std::size_t(c.heads) * c.headDim, 100 + s);
    AttentionCall call;
    call.q = rt.allocate("q", c.dtype, {1, c.heads, 1, c.headDim}, Layout::HeadMajor);
    rt.upload(call.q, qHost);
    call.k = kCache, call.v = vCache, call.kvLen = kvLen;
    call.o = rt.allocate("o", c.dtype, {1, c.heads, 1, c.headDim}, Layout::HeadMajor);
    call.lse = rt.allocate("lse", DType::F32, {1, c.heads, 1});
    rt.poison(call.o);
    rt.poison(*call.lse);
    const ContextParallelReport report = cp.decode(call);
    ASSERT_EQ(report.ranks.size(), comm.size());
    std::uint32_t held = 0;
    for (const auto& r : report.ranks) held += r.keys;
    EXPECT_EQ(held, kvLen) << "every key is held by exactly one rank";
    if (comm.rank() != 0) continue;
    // The same query over the whole cache on one device, and the float64 reference.
    AttentionCall whole = call;
    whole.k = kAll, whole.v = vAll;
    whole.o = rt.allocate("o_single", c.dtype, {1, c.heads, 1, c.headDim}, Layout::HeadMajor);
    whole.lse = rt.allocate("lse_single", DType::F32, {1, c.heads, 1});
    {
      auto d = rt.dispatcher();
      DeviceWorkspace w(rt);
      StepContext ctx{*d, w, &rt};
      single.run(ctx, whole);
      d->submit();
    }
    p.kvLen = kvLen;
    std::vector<float> kRef(std::size_t(c.kvHeads) * c.capacity * c.headDim, 0.0f), vRef = kRef;
    const auto kRound = rt.download(kAll), vRound = rt.download(vAll);
    std::vector<double> lseWant;
    const auto want = cpuAttention(p, rt.download(call.q), kRound, vRound, &lseWant);
    const double bound = c.dtype == DType::F32 ? 1e-4 : 3e-3;
    const auto got = rt.download(call.o);
    const ErrorStats vsRef = compareOutputs(got, want);
    EXPECT_TRUE(vsRef.passes(bound)) << "step " << s << ": merged vs reference relative " << vsRef.maxRel;
    const auto single1 = rt.download(whole.o);
    const ErrorStats vsSingle = compareOutputs(got, std::vector<double>(single1.begin(), single1.end()));
    EXPECT_TRUE(vsSingle.passes(bound)) << "step " << s << ": merged vs single device relative " << vsSingle.maxRel;
    const auto lseGot = rt.download(*call.lse);
    for (std::size_t i = 0; i < lseGot.size(); ++i) EXPECT_NEAR(lseGot[i], lseWant[i], 10 * bound) << "head " << i;
    if (s + 1 == c.steps) {
      std::string line = fmt::format("{} over {} ranks ({}):", c.name, comm.size(), shards.describe());
      for (std::uint32_t r = 0; r < comm.size(); ++r) {
        const auto& t = report.ranks[r];
        line += fmt::format(" rank {} {} keys {:.1f} us {} B;", r, t.keys, t.attentionMicros, t.bytesSent);
      }
      std::printf("%s merge %.1f us, %llu bytes moved\n", line.c_str(), report.mergeMicros,
                  static_cast<unsigned long long>(report.bytesMoved()));
    }
  }
  EXPECT_EQ(rt.device().instance().validationErrors(), validationBefore)
      << rt.device().instance().lastValidationError();
}

INSTANTIATE_TEST_SUITE_P(Shards, ContextParallel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<CpCase>& i) { return i.param.name; });

}  // namespace
}  // namespace foundry::test
