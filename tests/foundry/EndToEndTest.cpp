// A three-stage compound kernel (load -> scale through shared memory -> store), built, compiled,
// dispatched on the default device and checked element by element against the host.
#include <cmath>

#include <gtest/gtest.h>

#include "foundry/vk/VulkanDispatcher.h"
#include "support/TestRuntime.h"
#include "support/TestStages.h"

namespace foundry {
namespace {

struct Case {
  DType in, out;
  std::uint32_t tile;
  std::uint32_t count;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return fmt::format("{}_to_{}_tile{}_n{}", dtypeName(info.param.in), dtypeName(info.param.out), info.param.tile,
                     info.param.count);
}

class ThreeStageKernel : public ::testing::TestWithParam<Case> {};

TEST_P(ThreeStageKernel, MatchesTheHostElementByElement) {
  const Case c = GetParam();
  Runtime& rt = test::runtime();
  if (c.tile % rt.info().subgroupSize != 0) GTEST_SKIP() << "a workgroup of " << c.tile << " is below this device's subgroup";
  const auto src = rt.builder()
                       .workgroup(c.tile)
                       .add(std::make_shared<test::LoadStage>(c.in, c.tile))
                       .add(std::make_shared<test::ScaleStage>(c.tile))
                       .add(std::make_shared<test::StoreStage>(c.out))
                       .build();
  const auto input = test::randomVector(c.count, 1234 + c.count, -4.0f, 4.0f);
  const auto in = rt.allocate("src", c.in, {c.count});
  const auto out = rt.allocate("dst", c.out, {c.count});
  rt.upload(in, input);
  rt.poison(out);
  const float scale = 1.75f;
  const auto groups = (c.count + c.tile - 1) / c.tile;
  auto dispatcher = rt.dispatcher();
  dispatcher->dispatch(src, Arguments().bind("src", in).bind("dst", out).set("count", c.count).set("scale", scale),
                       {groups});
  const auto timing = dispatcher->submit();
  ASSERT_EQ(timing.dispatches.size(), 1u);
  EXPECT_EQ(timing.dispatches[0].kernel, src.name);

  // The input as the device saw it (rounded to the input dtype).
  const auto stored = decodeElements(encodeElements(input, c.in), c.in);
  const auto got = rt.download(out);
  const double tol = c.out == DType::F16 || c.in == DType::F16 ? 2e-3 : 1e-6;
  for (std::uint32_t i = 0; i < c.count; ++i) {
    const std::uint32_t group = i / c.tile, lane = i % c.tile;
    const std::uint32_t src_i = group * c.tile + (lane + 1) % c.tile;
    const double expected = src_i < c.count ? static_cast<double>(stored[src_i]) * scale : 0.0;
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " was never written";
    ASSERT_NEAR(got[i], expected, tol * std::max(1.0, std::abs(expected))) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Foundation, ThreeStageKernel,
                         ::testing::Values(Case{DType::F32, DType::F32, 64, 1000}, Case{DType::F16, DType::F32, 64, 4096},
                                           Case{DType::F32, DType::F16, 128, 777}, Case{DType::F16, DType::F16, 8, 9}),
                         caseName);

}  // namespace
}  // namespace foundry
