// Head-parallel attention over MPI ranks, run under `mpirun -np 2` and `-np 3` (ctest): each rank owns
// a group of KV heads (and their query heads), appends every token's rows of those heads, and runs the
// prefill and then decode steps on them alone; rank 0 gathers every rank's heads into one output, equal
// to one device's attention over all heads and to the float64 reference within the dtype bound. GQA
// and MHA, f16 and f32, outputs poisoned first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/runner/HeadParallelAttention.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/OutputComparison.h"
#include "foundry/vk/Device.h"
#include "runner/MpiTestMain.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct HeadCase {
  std::uint32_t heads = 12, kvHeads = 6, headDim = 64;  ///< 6 KV heads divide over 2 and 3 ranks
  std::uint32_t prompt = 37, steps = 3;
  DType dtype = DType::F16;
  std::string name;
};

std::vector<HeadCase> cases() {
  return {{.name = "gqa_f16"}, {.heads = 6, .headDim = 128, .prompt = 20, .steps = 2, .dtype = DType::F32,
                                .name = "mha_f32"}};
}

class HeadParallel : public ::testing::TestWithParam<HeadCase> {};

TEST_P(HeadParallel, PrefillAndDecodeEqualTheSingleDeviceResult) {
  const HeadCase& c = GetParam();
  Runtime& rt = *gRuntime;
  MpiCommunicator& comm = *gComm;
  const std::uint64_t validationBefore = rt.device().instance().validationErrors();
  HeadParallelAttention hp(rt, comm, c.heads, c.kvHeads, AttentionOptions{});
  const HeadGroup g = hp.mine();
  const std::uint32_t total = c.prompt + c.steps;
  const double bound = c.dtype == DType::F32 ? 1e-4 : 3e-3;

  // Every token's K/V rows with every head, the same on every rank, appended to this rank's caches.
  const Tensor kNew = rt.allocate("k_new", c.dtype, {1, c.kvHeads, total, c.headDim}, Layout::HeadMajor);
  const Tensor vNew = rt.allocate("v_new", c.dtype, {1, c.kvHeads, total, c.headDim}, Layout::HeadMajor);
  rt.upload(kNew, randomVector(std::size_t(c.kvHeads) * total * c.headDim, 61));
  rt.upload(vNew, randomVector(std::size_t(c.kvHeads) * total * c.headDim, 62));
  const Tensor kCache = rt.allocate("k_heads", c.dtype, {1, g.kvHeads(), total, c.headDim}, Layout::KvCache);
  const Tensor vCache = rt.allocate("v_heads", c.dtype, {1, g.kvHeads(), total, c.headDim}, Layout::KvCache);
  hp.append(kNew, vNew, kCache, vCache, 0);
  const auto kAll = rt.download(kNew), vAll = rt.download(vNew);

  // The prompt, then decode steps: (q_len, kv_len) of each call.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> calls{{c.prompt, c.prompt}};
  for (std::uint32_t s = 0; s < c.steps; ++s) calls.push_back({1, c.prompt + s + 1});
  for (const auto& [qLen, kvLen] : calls) {
    const Tensor q = rt.allocate("q_all", c.dtype, {1, c.heads, qLen, c.headDim}, Layout::HeadMajor);
    rt.upload(q, randomVector(std::size_t(c.heads) * qLen * c.headDim, 70 + kvLen));
    AttentionCall call;
    call.q = HeadParallelAttention::heads(q, g.qBegin, g.qEnd);
    call.k = kCache, call.v = vCache, call.kvLen = kvLen;
    call.o = Tensor::describe("o_heads", c.dtype, {1, g.queryHeads(), qLen, c.headDim}, Layout::HeadMajor);
    std::optional<Tensor> whole;
    if (comm.rank() == 0) {
      whole = rt.allocate("o_all", c.dtype, {1, c.heads, qLen, c.headDim}, Layout::HeadMajor);
      rt.poison(*whole);
    }
    const HeadParallelReport report = hp.run(call, whole);
    ASSERT_EQ(report.ranks.size(), comm.size());
    if (comm.rank() != 0) continue;
    // The same call over every head on one device, and the float64 reference.
    AttentionProblem p;
    p.batch = 1, p.nHeads = c.heads, p.nKvHeads = c.kvHeads, p.qLen = qLen, p.headDim = c.headDim;
    p.kvCapacity = total, p.kvLen = kvLen, p.dtype = c.dtype;
    const auto got = rt.download(*whole);
    const ErrorStats vsRef = compareOutputs(got, cpuAttention(p, rt.download(q), kAll, vAll));
    EXPECT_TRUE(vsRef.passes(bound)) << "q_len " << qLen << " kv_len " << kvLen << ": vs the reference "
                                     << vsRef.maxRel << " (non-finite " << vsRef.nonFinite << ")";
    AttentionCall single;
    single.q = q, single.k = kNew, single.v = vNew, single.kvLen = kvLen;
    single.k.layout = single.v.layout = Layout::KvCache;
    single.o = rt.allocate("o_single", c.dtype, {1, c.heads, qLen, c.headDim}, Layout::HeadMajor);
    {
      auto d = rt.dispatcher();
      DeviceWorkspace w(rt);
      StepContext ctx{*d, w, &rt};
      FlashAttentionStep(rt.info(), rt.snippets(), AttentionOptions{}).run(ctx, single);
      d->submit();
    }
    const auto one = rt.download(single.o);
    const ErrorStats vsSingle = compareOutputs(got, std::vector<double>(one.begin(), one.end()));
    EXPECT_TRUE(vsSingle.passes(bound)) << "q_len " << qLen << ": vs one device " << vsSingle.maxRel;
    if (qLen == 1 && kvLen == total) {
      std::string line = fmt::format("{} over {} ranks:", c.name, comm.size());
      for (std::uint32_t r = 0; r < comm.size(); ++r) {
        line += fmt::format(" rank {} heads [{}, {}) {:.0f} us {} B;", r, hp.group(r).qBegin, hp.group(r).qEnd,
                            report.ranks[r].attentionMicros, report.ranks[r].bytesSent);
      }
      std::printf("%s\n", line.c_str());
    }
  }
  EXPECT_EQ(rt.device().instance().validationErrors(), validationBefore)
      << rt.device().instance().lastValidationError();
}

INSTANTIATE_TEST_SUITE_P(Heads, HeadParallel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<HeadCase>& i) { return i.param.name; });

TEST(HeadParallelRefuses, KvHeadsThatDoNotDivideOverTheRanks) {
  if (gComm->size() == 1) GTEST_SKIP() << "one rank takes any number of heads";
  const std::uint32_t kv = gComm->size() + 1;  // 3 over 2 ranks, 4 over 3
  EXPECT_THAT([&] { HeadParallelAttention(*gRuntime, *gComm, kv, kv, AttentionOptions{}); },
              ::testing::ThrowsMessage<UserError>(::testing::HasSubstr(
                  fmt::format("{} KV heads do not divide over {} ranks", kv, gComm->size()))));
}

}  // namespace
}  // namespace foundry::test
