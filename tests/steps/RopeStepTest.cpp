// RopeStep (in place) against cpuRope in float64: head-major and token-major, both pairings, partial
// rotary dims (the rest must pass through bit for bit), llama3 scaling, and a position offset.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "foundry/Runtime.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct RopeStepCase {
  std::uint32_t batch, heads, tokens, headDim;
  DType dtype;
  Layout layout;
  RopeSpec spec;
  std::uint32_t pos0;

  std::vector<std::int64_t> dims() const {
    if (layout == Layout::TokenMajor) return {batch, tokens, heads, headDim};
    return {batch, heads, tokens, headDim};
  }
  /// Position of the i-th head vector in packed order.
  std::uint32_t positionOf(std::size_t vector) const {
    const std::size_t token = layout == Layout::TokenMajor ? (vector / heads) % tokens : vector % tokens;
    return pos0 + static_cast<std::uint32_t>(token);
  }
  std::string name() const {
    return fmt::format("b{}_h{}_s{}_D{}_{}_{}_{}_pos{}", batch, heads, tokens, headDim, dtypeName(dtype),
                       layout == Layout::TokenMajor ? "tok" : "head", ropeName(spec), pos0);
  }
};

void PrintTo(const RopeStepCase& c, std::ostream* os) { *os << c.name(); }

RopeSpec spec(RopePairing pairing, std::uint32_t rotaryDims = 0, bool llama3 = false) {
  RopeSpec s;
  s.pairing = pairing;
  s.rotaryDims = rotaryDims;
  if (llama3) {
    s.theta = 500000.0;
    s.llama3 = Llama3Scaling{};
  }
  return s;
}

// The kernel forms the angle from an f32 product position * turns: its error is a few times
// position * inv_freq * 2^-24 radians (inv_freq <= 1), on top of the rounding of the stored result.
double ropeBound(DType dtype, std::uint32_t maxPosition) {
  const double angle = 4.0 * (maxPosition + 1.0) * std::ldexp(1.0, -24);
  return (dtype == DType::F32 ? 2e-6 : 1e-3) + angle;
}

std::string caseName(const ::testing::TestParamInfo<RopeStepCase>& param) { return param.param.name(); }

class RopeStepParity : public ::testing::TestWithParam<RopeStepCase> {};

TEST_P(RopeStepParity, MatchesCpuRope) {
  const RopeStepCase& c = GetParam();
  Runtime& rt = runtime();
  const Tensor x = rt.allocate("x", c.dtype, c.dims(), c.layout);
  const std::vector<float> input =
      decodeElements(encodeElements(randomVector(x.numel(), 900 + c.pos0 + c.headDim, -2.0f, 2.0f), c.dtype), c.dtype);
  rt.upload(x, input);
  const Tensor table = makeRopeTable(rt, c.spec, c.headDim);

  RopeStep step(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  step.run(ctx, x, table, c.spec, c.pos0);
  dispatcher->submit();
  const std::vector<float> got = rt.download(x);

  std::vector<float> want = input;
  std::vector<std::uint32_t> positions(input.size() / c.headDim);
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = c.positionOf(i);
  cpuRope(c.spec, c.headDim, want, positions);

  const std::uint32_t rotary = c.spec.dims(c.headDim);
  const double bound = ropeBound(c.dtype, c.pos0 + c.tokens - 1);
  double worst = 0;
  std::size_t worstAt = 0, passThroughChanged = 0, nonFinite = 0;
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++nonFinite;
      continue;
    }
    if (i % c.headDim >= rotary) {
      passThroughChanged += got[i] != input[i];
      continue;
    }
    // Rotated pairs keep their norm, so the error is measured against the input's range (2).
    const double e = std::abs(double(got[i]) - want[i]) / 2.0;
    if (e > worst) worst = e, worstAt = i;
  }
  EXPECT_EQ(nonFinite, 0u);
  EXPECT_EQ(passThroughChanged, 0u) << "dimensions past rotary_dims " << rotary << " must pass through";
  EXPECT_LE(worst, bound) << "worst at element " << worstAt << " (dim " << worstAt % c.headDim << ", position "
                          << c.positionOf(worstAt / c.headDim) << "): got " << got[worstAt] << " want "
                          << want[worstAt];
  // Something was rotated at all: a kernel that does nothing must fail (position 0 rotates nothing).
  if (c.pos0 + c.tokens > 1) {
    double moved = 0;
    for (std::size_t i = 0; i < got.size(); ++i) moved = std::max(moved, std::abs(double(want[i]) - input[i]));
    EXPECT_GT(moved, 10 * bound) << "the case rotates too little to test anything";
  }
}

constexpr Layout HM = Layout::HeadMajor;
constexpr Layout TM = Layout::TokenMajor;

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeStepParity,
    ::testing::Values(RopeStepCase{2, 3, 5, 128, DType::F32, HM, spec(RopePairing::RotateHalf), 7},
                      RopeStepCase{1, 4, 6, 64, DType::F32, TM, spec(RopePairing::Interleaved), 100},
                      RopeStepCase{1, 2, 9, 128, DType::F16, HM, spec(RopePairing::Interleaved, 32), 0},
                      RopeStepCase{2, 3, 4, 128, DType::F16, TM, spec(RopePairing::RotateHalf, 32), 1000},
                      RopeStepCase{1, 4, 3, 64, DType::F16, HM, spec(RopePairing::RotateHalf), 31},
                      RopeStepCase{3, 2, 7, 64, DType::F32, TM, spec(RopePairing::Interleaved, 16), 3},
                      RopeStepCase{1, 2, 3, 128, DType::F32, TM, spec(RopePairing::RotateHalf, 0, true), 5000},
                      RopeStepCase{1, 1, 2, 80, DType::F32, HM, spec(RopePairing::RotateHalf, 64), 12}),
    caseName);

}  // namespace
}  // namespace foundry::test
