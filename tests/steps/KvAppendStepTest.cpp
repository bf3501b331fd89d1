// KvAppendStep against a host computation: new K/V rows (head-major or token-major) land in the caches
// at an offset, K rotated by RoPE at its own positions when asked, V never; every other cache row is
// left exactly as it was. V rows may be narrower than K rows (their own width and strides), or absent
// (runKeys: a latent cache whose values are its keys' columns).
#include <cmath>
#include <optional>

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

struct KvAppendCase {
  std::uint32_t batch, kvHeads, tokens, capacity, headDim;
  DType dtype;
  Layout newLayout;
  std::uint32_t cachePos;
  std::optional<RopeSpec> rope;
  std::uint32_t ropePos0 = 0;
  std::uint32_t valueDim = 0;  ///< 0: headDim
  bool keysOnly = false;       ///< runKeys

  std::uint32_t vDim() const { return valueDim ? valueDim : headDim; }
  std::vector<std::int64_t> newDims(std::uint32_t d) const {
    if (newLayout == Layout::TokenMajor) return {batch, tokens, kvHeads, d};
    return {batch, kvHeads, tokens, d};
  }
  std::size_t newIndex(std::uint32_t b, std::uint32_t h, std::uint32_t t, std::uint32_t d) const {
    if (newLayout == Layout::TokenMajor) return ((std::size_t(b) * tokens + t) * kvHeads + h) * d;
    return ((std::size_t(b) * kvHeads + h) * tokens + t) * d;
  }
  std::size_t cacheIndex(std::uint32_t b, std::uint32_t h, std::uint32_t s, std::uint32_t d) const {
    return ((std::size_t(b) * kvHeads + h) * capacity + s) * d;
  }
  std::string name() const {
    return fmt::format("b{}_hkv{}_t{}_cap{}_D{}{}_{}_{}_at{}{}{}", batch, kvHeads, tokens, capacity, headDim,
                       valueDim ? fmt::format("v{}", valueDim) : "", dtypeName(dtype),
                       newLayout == Layout::TokenMajor ? "tok" : "head", cachePos,
                       rope ? fmt::format("_{}_pos{}", ropeName(*rope), ropePos0) : "", keysOnly ? "_keys" : "");
  }
};

void PrintTo(const KvAppendCase& c, std::ostream* os) { *os << c.name(); }

RopeSpec spec(RopePairing pairing, std::uint32_t rotaryDims = 0) {
  RopeSpec s;
  s.pairing = pairing;
  s.rotaryDims = rotaryDims;
  return s;
}

std::vector<float> randomOf(DType dtype, std::size_t n, std::uint32_t seed) {
  return decodeElements(encodeElements(randomVector(n, seed, -2.0f, 2.0f), dtype), dtype);
}

std::string caseName(const ::testing::TestParamInfo<KvAppendCase>& param) { return param.param.name(); }

class KvAppendParity : public ::testing::TestWithParam<KvAppendCase> {};

TEST_P(KvAppendParity, WritesExactlyTheNewRows) {
  const KvAppendCase& c = GetParam();
  Runtime& rt = runtime();
  const std::uint32_t D = c.headDim, Dv = c.vDim();
  const Tensor kNew = rt.allocate("k_new", c.dtype, c.newDims(D), c.newLayout);
  const Tensor vNew = rt.allocate("v_new", c.dtype, c.newDims(Dv), c.newLayout);
  const Tensor kCache = rt.allocate("k_cache", c.dtype, {c.batch, c.kvHeads, c.capacity, D}, Layout::KvCache);
  const Tensor vCache = rt.allocate("v_cache", c.dtype, {c.batch, c.kvHeads, c.capacity, Dv}, Layout::KvCache);
  const auto kn = randomOf(c.dtype, kNew.numel(), 41 + c.cachePos);
  const auto vn = randomOf(c.dtype, vNew.numel(), 42 + c.cachePos);
  const auto k0 = randomOf(c.dtype, kCache.numel(), 43 + c.cachePos);
  const auto v0 = randomOf(c.dtype, vCache.numel(), 44 + c.cachePos);
  rt.upload(kNew, kn);
  rt.upload(vNew, vn);
  rt.upload(kCache, k0);
  rt.upload(vCache, v0);

  std::optional<KvAppendStep::Rope> rope;
  if (c.rope) rope = KvAppendStep::Rope{*c.rope, makeRopeTable(rt, *c.rope, c.headDim), c.ropePos0};
  KvAppendStep step(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  if (c.keysOnly) step.runKeys(ctx, kNew, kCache, c.cachePos, rope);
  else step.run(ctx, kNew, vNew, kCache, vCache, c.cachePos, rope);
  dispatcher->submit();
  const auto kGot = rt.download(kCache);
  const auto vGot = rt.download(vCache);

  // The expected caches, on the host.
  std::vector<float> kWant = k0, vWant = v0;
  for (std::uint32_t b = 0; b < c.batch; ++b) {
    for (std::uint32_t h = 0; h < c.kvHeads; ++h) {
      for (std::uint32_t t = 0; t < c.tokens; ++t) {
        std::vector<float> k(kn.begin() + c.newIndex(b, h, t, D), kn.begin() + c.newIndex(b, h, t, D) + D);
        if (c.rope) cpuRope(*c.rope, D, k, {c.ropePos0 + t});
        std::copy(k.begin(), k.end(), kWant.begin() + c.cacheIndex(b, h, c.cachePos + t, D));
        if (c.keysOnly) continue;  // the value cache is left alone
        std::copy_n(vn.begin() + c.newIndex(b, h, t, Dv), Dv, vWant.begin() + c.cacheIndex(b, h, c.cachePos + t, Dv));
      }
    }
  }
  // Copies are exact. A rotated K (|value| < 3) is held to the rounding of its dtype plus the f32
  // angle error, a few times position * 2^-24 radians.
  const double angle = 4.0 * (c.ropePos0 + c.tokens) * std::ldexp(1.0, -24);
  const double kBound = c.rope ? (c.dtype == DType::F32 ? 4e-6 : 4e-3) + 3.0 * angle : 0.0;
  std::size_t kBad = 0, vBad = 0, firstBad = 0;
  for (std::size_t i = 0; i < kGot.size(); ++i) {
    const bool isNew = (i / D) % c.capacity >= c.cachePos && (i / D) % c.capacity < c.cachePos + c.tokens;
    const bool rotated = c.rope && isNew && i % D < c.rope->dims(D);
    const bool kOk = rotated ? std::abs(double(kGot[i]) - kWant[i]) <= kBound : kGot[i] == kWant[i];
    if (!kOk && kBad++ == 0) firstBad = i;
  }
  for (std::size_t i = 0; i < vGot.size(); ++i) vBad += vGot[i] != vWant[i];
  EXPECT_EQ(kBad, 0u) << "first wrong K element " << firstBad << " (row " << (firstBad / D) % c.capacity << ", dim "
                      << firstBad % D << "): got " << kGot[firstBad] << " want " << kWant[firstBad];
  EXPECT_EQ(vBad, 0u);
}

constexpr Layout HM = Layout::HeadMajor;
constexpr Layout TM = Layout::TokenMajor;

INSTANTIATE_TEST_SUITE_P(
    Shapes, KvAppendParity,
    ::testing::Values(KvAppendCase{2, 2, 5, 20, 64, DType::F16, HM, 7, std::nullopt},
                      KvAppendCase{2, 2, 5, 20, 128, DType::F32, TM, 7, std::nullopt},
                      KvAppendCase{1, 4, 1, 9, 128, DType::F16, TM, 8, std::nullopt},  // decode: the last row
                      KvAppendCase{1, 2, 6, 6, 64, DType::F32, HM, 0, std::nullopt},   // fills the cache
                      KvAppendCase{2, 2, 5, 20, 128, DType::F32, HM, 3, spec(RopePairing::RotateHalf), 3},
                      KvAppendCase{2, 3, 4, 16, 64, DType::F16, TM, 11, spec(RopePairing::Interleaved), 11},
                      KvAppendCase{1, 2, 3, 40, 128, DType::F16, HM, 30, spec(RopePairing::RotateHalf, 32), 30},
                      KvAppendCase{3, 1, 2, 12, 128, DType::F32, TM, 5, spec(RopePairing::Interleaved, 32), 77},
                      // DeepSeek-V2's 192/128 heads: V rows of their own width and strides.
                      KvAppendCase{2, 2, 5, 20, 192, DType::F16, TM, 7, spec(RopePairing::Interleaved, 64), 7, 128},
                      KvAppendCase{1, 3, 4, 9, 192, DType::F32, HM, 2, std::nullopt, 0, 128},
                      // Latent rows (absorbed MLA): keys alone, rotated in their leading 64 dims.
                      KvAppendCase{2, 1, 5, 20, 576, DType::F16, TM, 7, spec(RopePairing::Interleaved, 64), 7, 0, true},
                      KvAppendCase{1, 1, 1, 9, 576, DType::BF16, HM, 8, std::nullopt, 0, 0, true}),
    caseName);

}  // namespace
}  // namespace foundry::test
