// Asynchronous submission and replayed recordings on the device: a replayed recording computes what
// direct dispatch computes, from the inputs of the moment it runs; submitAsync returns before the
// GPU is done, so host work overlaps GPU work (timed); Submissions are waited on in any order.
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/Runtime.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/TestRuntime.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

using Clock = std::chrono::steady_clock;

/// Elements [first, first + n) of a one-dimensional tensor.
Tensor slice(const Tensor& t, std::uint32_t first, std::uint32_t n) {
  Tensor v = t;
  v.dims = {n};
  v.offset = t.offset + first;
  return v;
}

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class AsyncReplay : public ::testing::Test {
 protected:
  Runtime& rt = test::runtime();
  KernelSource kernel = test::scaleKernel(rt);

  /// Four f32 tensors of n elements: a and b for one dispatcher, a2 and b2 for another; a and a2
  /// hold the same random values.
  std::array<Tensor, 4> twoPairs(std::uint32_t n, std::uint32_t seed) {
    std::array<Tensor, 4> t = {rt.allocate("a", DType::F32, {n}), rt.allocate("b", DType::F32, {n}),
                               rt.allocate("a2", DType::F32, {n}), rt.allocate("b2", DType::F32, {n})};
    const auto x = test::randomVector(n, seed);
    rt.upload(t[0], x);
    rt.upload(t[2], x);
    return t;
  }

  /// `passes` dispatches ping-ponging between a and b (each reads what the last wrote), n elements.
  void chain(Dispatcher& d, const Tensor& a, const Tensor& b, std::uint32_t n, int passes, float scale) {
    for (int i = 0; i < passes; ++i) {
      const Tensor& src = i % 2 ? b : a;
      const Tensor& dst = i % 2 ? a : b;
      d.dispatch(kernel, Arguments().bind("src", src).bind("dst", dst).set("count", n).set("scale", scale),
                 {(n + 63) / 64});
    }
  }
};

TEST_F(AsyncReplay, AReplayedRecordingEqualsDirectDispatchOnTodaysInputs) {
  const std::uint32_t n = 4096;
  const auto a = rt.allocate("a", DType::F32, {n}), b = rt.allocate("b", DType::F32, {n});
  const auto a2 = rt.allocate("a2", DType::F32, {n}), b2 = rt.allocate("b2", DType::F32, {n});
  auto replayer = rt.dispatcher();
  chain(*replayer, a, b, n, 3, 1.5f);
  const auto recording = replayer->capture();
  EXPECT_EQ(recording->dispatches(), 3u);
  EXPECT_EQ(replayer->pending(), 0u);
  auto direct = rt.dispatcher();
  for (std::uint32_t round = 0; round < 3; ++round) {
    const auto x = test::randomVector(n, 100 + round);
    rt.upload(a, x);
    rt.poison(b);
    const Submission s = replayer->replay(*recording);
    EXPECT_GT(s.value, 0u);
    const SubmitResult r = replayer->wait(s);
    EXPECT_EQ(r.dispatches.size(), 3u);
    rt.upload(a2, x);
    rt.poison(b2);
    chain(*direct, a2, b2, n, 3, 1.5f);
    direct->submit();
    EXPECT_EQ(rt.download(b), rt.download(b2)) << "round " << round;
    EXPECT_EQ(rt.download(b)[0], x[3] * 1.5f * 1.5f * 1.5f) << "round " << round;
  }
  EXPECT_EQ(recording->replays(), 3u);
  // Replayed twice without waiting in between: the second waits for the first (one command buffer).
  const Submission s1 = replayer->replay(*recording), s2 = replayer->replay(*recording);
  EXPECT_GT(s2.value, s1.value);
  EXPECT_EQ(replayer->wait(s2).dispatches.size(), 3u);
  EXPECT_THROW(replayer->capture(), UserError);  // nothing recorded
}

TEST_F(AsyncReplay, SubmissionsAreWaitedOnInAnyOrder) {
  const std::uint32_t n = 1024;
  const auto a = rt.allocate("a", DType::F32, {n}), b = rt.allocate("b", DType::F32, {n});
  const auto c = rt.allocate("c", DType::F32, {n}), e = rt.allocate("e", DType::F32, {n});
  const auto x = test::randomVector(n, 7);
  rt.upload(a, x);
  rt.upload(c, x);
  auto d = rt.dispatcher();
  chain(*d, a, b, n, 1, 2.0f);
  const Submission first = d->submitAsync();
  chain(*d, c, e, n, 1, 4.0f);  // recorded while the first may run
  const Submission second = d->submitAsync();
  EXPECT_GT(second.value, first.value);
  EXPECT_EQ(d->wait(second).dispatches.size(), 1u);
  EXPECT_EQ(d->wait(first).dispatches.size(), 1u);
  EXPECT_TRUE(d->wait(first).dispatches.empty()) << "a submission's results are reported once";
  EXPECT_EQ(rt.download(b)[0], x[1] * 2.0f);
  EXPECT_EQ(rt.download(e)[0], x[1] * 4.0f);
}

// Recorded once with parameters in a host-visible block, then given other push constants and grids:
// each replay computes what direct dispatch computes with those values (outputs poisoned first), and
// nothing is recorded again.
TEST_F(AsyncReplay, AParameterizedRecordingReplaysWithNewPushConstantsAndGrids) {
  const std::uint32_t n = 4096;
  const auto [a, b, a2, b2] = twoPairs(n, 11);
  const auto x = rt.download(a);
  auto replayer = rt.dispatcher();
  auto direct = rt.dispatcher();
  replayer->beginParameterized();
  chain(*replayer, a, b, n, 3, 1.0f);
  const auto recording = replayer->capture();
  ASSERT_TRUE(recording->parameterized());
  // Each round: another scale (a push constant) and count (a push constant and the grid).
  const std::uint32_t counts[] = {n, 1000, 64, 0};
  for (std::uint32_t round = 0; round < 4; ++round) {
    const float scale = 0.5f + round;
    rt.upload(a, x);
    rt.upload(a2, x);
    rt.poison(b);
    rt.poison(b2);
    RecordingUpdate update(*replayer, recording);
    chain(update, a, b, counts[round], 3, scale);
    ASSERT_TRUE(update.matches()) << update.mismatch();
    EXPECT_EQ(update.submit().dispatches.size(), 3u);
    chain(*direct, a2, b2, counts[round], 3, scale);
    direct->submit();
    const auto got = rt.download(b), want = rt.download(b2);
    for (std::uint32_t i = 0; i < n; ++i) {
      // Bitwise, NaN (unwritten) included.
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << "round " << round << " element " << i;
    }
    if (counts[round] > 0) {
      EXPECT_EQ(got[0], x[3] * scale * scale * scale);  // the test stages read a neighbour
    }
    if (counts[round] < n) {
      EXPECT_TRUE(std::isnan(got[counts[round]])) << "written past count in round " << round;
    }
  }
  EXPECT_EQ(recording->replays(), 4u);
  EXPECT_EQ(recording->dispatches(), 3u);
}

// A dispatch that is not the captured one (another buffer range, another kernel, one too many or too
// few) is refused for replay and says which; the recording is left to be replaced.
TEST_F(AsyncReplay, ARecordingUpdateWithOtherDispatchesDoesNotMatch) {
  const std::uint32_t n = 1024;
  const auto a = rt.allocate("a", DType::F32, {2 * n}), b = rt.allocate("b", DType::F32, {n});
  auto d = rt.dispatcher();
  d->beginParameterized();
  chain(*d, slice(a, 0, n), b, n, 1, 1.0f);
  const auto recording = d->capture();
  {
    RecordingUpdate update(*d, recording);
    chain(update, slice(a, n, n), b, n, 1, 1.0f);  // the next token's view
    EXPECT_FALSE(update.matches());
    EXPECT_NE(update.mismatch().find("src"), std::string::npos) << update.mismatch();
    EXPECT_THROW(update.submitAsync(), UserError);
  }
  {
    RecordingUpdate update(*d, recording);
    EXPECT_FALSE(update.matches());
    EXPECT_NE(update.mismatch().find("0 dispatches"), std::string::npos) << update.mismatch();
    chain(update, slice(a, 0, n), b, n, 2, 1.0f);
    EXPECT_NE(update.mismatch().find("holds 1"), std::string::npos) << update.mismatch();
  }
  // A recording made without beginParameterized() has its values in the command buffer.
  chain(*d, slice(a, 0, n), b, n, 1, 1.0f);
  EXPECT_THROW(RecordingUpdate(*d, d->capture()), UserError);
  // Nothing may be pending when parameterized recording begins.
  chain(*d, slice(a, 0, n), b, n, 1, 1.0f);
  EXPECT_THROW(d->beginParameterized(), UserError);
  d->submit();
}

// The GPU (lavapipe: CPU threads) runs a chain of dispatches while the host waits on something of its
// own, a stand-in for I/O or a network reply that needs no CPU, so the timing holds on a loaded
// machine. Submitting and waiting costs gpu + host; submitting without waiting costs about the larger.
TEST_F(AsyncReplay, HostWorkOverlapsGpuWork) {
  const std::uint32_t n = 1u << 20;
  const auto a = rt.allocate("a", DType::F32, {n}), b = rt.allocate("b", DType::F32, {n});
  rt.upload(a, test::randomVector(n, 9));
  auto d = rt.dispatcher();
  // Calibrate: enough passes for about 0.2 s of GPU work.
  int passes = 4;
  double gpu = 0;
  for (;;) {
    chain(*d, a, b, n, passes, 1.0f);
    const auto t0 = Clock::now();
    d->submit();
    gpu = secondsSince(t0);
    if (gpu >= 0.2 || passes >= 4096) break;
    passes *= 2;
  }
  double bestRatio = 1e9, bestWall = 0, bestSum = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    chain(*d, a, b, n, passes, 1.0f);
    auto t0 = Clock::now();
    d->submit();
    const double gpuNow = secondsSince(t0);
    const auto host = std::chrono::duration<double>(gpuNow);
    chain(*d, a, b, n, passes, 1.0f);
    t0 = Clock::now();
    const Submission s = d->submitAsync();
    const double returned = secondsSince(t0);
    std::this_thread::sleep_for(host);  // the host's own work
    d->wait(s);
    const double wall = secondsSince(t0);
    EXPECT_LT(returned, gpuNow / 2) << "submitAsync waited for the GPU";
    if (wall / (gpuNow + host.count()) < bestRatio) {
      bestRatio = wall / (gpuNow + host.count());
      bestWall = wall;
      bestSum = gpuNow + host.count();
    }
  }
  EXPECT_LT(bestRatio, 0.8) << "async wall " << bestWall << " s vs gpu + host " << bestSum << " s (" << passes
                                 << " passes)";
}

// A program that waits through the Runtime (or never) does not keep every frame it submitted, and the
// tensors those frames bound, until the dispatcher dies: finished frames are taken back as the next
// submission goes, their timings kept for a dispatcher's wait (a trial found 512 bytes of device memory
// and about 15 kB of host memory held per call).
TEST_F(AsyncReplay, WaitingThroughTheRuntimeHoldsNoFinishedFrame) {
  const std::uint32_t n = 256;
  const auto a = rt.allocate("a", DType::F32, {n});
  rt.upload(a, test::randomVector(n, 11));
  auto d = rt.dispatcher();
  std::uint64_t live = 0;
  Submission last;
  for (int i = 0; i < 200; ++i) {
    const auto out = rt.allocate("out", DType::F32, {n});  // dropped by the program at once
    chain(*d, a, out, n, 1, 2.0f);
    last = d->submitAsync();
    rt.wait(last);
    if (i == 9) live = rt.device().memoryStats().liveBytes;
  }
  EXPECT_LE(rt.device().memoryStats().liveBytes, live) << "finished frames hold the tensors they bound";
  EXPECT_EQ(d->wait(last).dispatches.size(), 1u) << "the timings of a submission waited through the Runtime";
  EXPECT_TRUE(d->wait(last).dispatches.empty());
}

TEST_F(AsyncReplay, AnotherDispatchersSubmissionIsWaitedFor) {
  const std::uint32_t n = 1u << 18;
  const auto a = rt.allocate("a", DType::F32, {n}), b = rt.allocate("b", DType::F32, {n});
  rt.upload(a, test::randomVector(n, 12));
  auto mine = rt.dispatcher(), other = rt.dispatcher();
  chain(*other, a, b, n, 64, 1.0f);
  const Submission s = other->submitAsync();
  EXPECT_TRUE(mine->wait(s).dispatches.empty()) << "another dispatcher's timings are its own";
  EXPECT_TRUE(rt.device().reached(s.value)) << "wait returned before the work was done";
  EXPECT_EQ(other->wait(s).dispatches.size(), 64u);
}

TEST_F(AsyncReplay, AnotherRuntimesSubmissionIsRefused) {
  Runtime second(rt.options());
  const std::uint32_t n = 1024;
  const auto a = second.allocate("a", DType::F32, {n}), b = second.allocate("b", DType::F32, {n});
  auto d = second.dispatcher();
  d->dispatch(test::scaleKernel(second), Arguments().bind("src", a).bind("dst", b).set("count", n).set("scale", 1.0f), {n / 64});
  const Submission s = d->submitAsync();
  second.wait(s);
  try {
    rt.wait(s);
    ADD_FAILURE() << "a submission of another Runtime was waited for";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "submission");
    EXPECT_NE(std::string(e.what()).find("submitted on another Runtime's device"), std::string::npos) << e.what();
  }
  auto mine = rt.dispatcher();
  EXPECT_THROW(mine->wait(s), UserError);
}

}  // namespace
}  // namespace foundry
