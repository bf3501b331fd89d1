// Several threads build and run kernels through one Runtime at once (docs/threading.md): each with
// its own dispatcher and workspace, sharing the runtime's kernel and pipeline caches and its queue.
// Every thread's attention output matches the CPU float64 reference, and a kernel that all threads
// need is compiled and made into a pipeline once. The ThreadSanitizer build runs this suite
// (ctest -L tsan).
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "foundry/Runtime.h"
#include "foundry/vk/PipelineCache.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/OutputComparison.h"
#include "support/TestRuntime.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

TEST(Threading, ThreadsBuildAndRunKernelsThroughOneRuntime) {
  Runtime& rt = test::runtime();
  constexpr int kThreads = 4;
  // A kernel no earlier test built, so every thread misses on it at once.
  const float tag = 0.375f + static_cast<float>(rt.kernels().compiles() % 1000);
  auto shared = [&] {
    return rt.builder()
        .workgroup(64)
        .name(fmt::format("threading_{}", tag))
        .note("tag", std::to_string(tag))
        .add(std::make_shared<test::LoadStage>(DType::F32, 64))
        .add(std::make_shared<test::ScaleStage>(64))
        .add(std::make_shared<test::StoreStage>(DType::F32))
        .build();
  };
  const auto compiles0 = rt.kernels().compiles() + rt.kernels().diskHits();
  const auto pipelines0 = rt.pipelines().created();
  std::latch start(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        start.arrive_and_wait();
        const std::uint32_t n = 256;
        const auto x = test::randomVector(n, 40 + t);
        const Tensor in = rt.allocate("in", DType::F32, {n}), out = rt.allocate("out", DType::F32, {n});
        rt.upload(in, x);
        rt.poison(out);
        auto d = rt.dispatcher();
        const KernelSource k = shared();
        d->dispatch(k, Arguments().bind("src", in).bind("dst", out).set("count", n).set("scale", float(t + 1)),
                    {n / 64});
        d->submit();
        const auto got = rt.download(out);
        for (std::uint32_t i = 0; i < n; ++i) {
          const std::uint32_t g = i / 64, lane = i % 64;
          if (got[i] != x[g * 64 + (lane + 1) % 64] * float(t + 1)) {
            failures[t] = fmt::format("element {}: {}", i, got[i]);
            return;
          }
        }
        // And a decode attention call of this thread's own shape, through its own step and workspace.
        FlashAttentionStep step(rt.info(), rt.snippets(), AttentionOptions());
        DeviceWorkspace workspace(rt);
        AttentionCall call;
        const std::uint32_t H = 4, Hkv = 2, N = 40 + 8 * t, D = 64;
        call.q = rt.allocate("q", DType::F32, {1, H, 1, D}, Layout::HeadMajor);
        call.k = rt.allocate("k", DType::F32, {1, Hkv, N, D}, Layout::KvCache);
        call.v = rt.allocate("v", DType::F32, {1, Hkv, N, D}, Layout::KvCache);
        call.o = rt.allocate("o", DType::F32, {1, H, 1, D}, Layout::HeadMajor);
        call.kvLen = N;
        const auto q = test::randomVector(call.q.numel(), 50 + t), kv = test::randomVector(call.k.numel(), 60 + t),
                   vv = test::randomVector(call.v.numel(), 70 + t);
        rt.upload(call.q, q);
        rt.upload(call.k, kv);
        rt.upload(call.v, vv);
        rt.poison(call.o);
        StepContext ctx{*d, workspace, &rt};
        step.run(ctx, call);
        const Submission s = d->submitAsync();
        d->wait(s);
        const ErrorStats e = compareOutputs(rt.download(call.o), cpuAttention(describeCall(call), q, kv, vv));
        if (!e.passes(1e-4)) failures[t] = fmt::format("attention: max rel {}, non-finite {}", e.maxRel, e.nonFinite);
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  // The shared kernel: one compile (or disk hit), one pipeline, whatever the number of threads.
  EXPECT_EQ(rt.kernels().compiles() + rt.kernels().diskHits() - compiles0,
            rt.pipelines().created() - pipelines0);
}

}  // namespace
}  // namespace foundry
