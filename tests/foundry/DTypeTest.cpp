#include <bit>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "foundry/DType.h"

namespace foundry {
namespace {

TEST(DType, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = halfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f)))) << bits;
      continue;
    }
    ASSERT_EQ(floatToHalf(f), h) << "half bits 0x" << std::hex << bits;
  }
}

TEST(DType, FloatToHalfMatchesTheCompilersConversion) {
#ifndef __FLT16_MAX__
  GTEST_SKIP() << "this compiler has no _Float16 to compare with (clang 14 on x86-64); GCC builds run it";
#else
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = std::bit_cast<float>(bits(gen));
    if (std::isnan(f)) continue;
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(floatToHalf(f), expected) << "float " << f;
  }
#endif
}

TEST(DType, HalfOverflowAndUnderflow) {
  EXPECT_EQ(halfToFloat(floatToHalf(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(65520.0f))));
  EXPECT_EQ(halfToFloat(floatToHalf(1e-8f)), 0.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
}

TEST(DType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(bfloat16ToFloat(floatToBFloat16(1.0f)), 1.0f);
  EXPECT_EQ(bfloat16ToFloat(floatToBFloat16(3.14159f)), 3.140625f);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBFloat16(std::nanf("")))));
}

TEST(DType, EncodeDecodeKeepsValuesWithinPrecision) {
  const std::vector<float> v = {0.5f, -1.25f, 3.0e4f, 1.0e-3f};
  for (DType d : {DType::F16, DType::F32, DType::BF16}) {
    const auto back = decodeElements(encodeElements(v, d), d);
    ASSERT_EQ(back.size(), v.size());
    const float tol = d == DType::F32 ? 0.0f : (d == DType::F16 ? 1e-3f : 8e-3f);
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], std::abs(v[i]) * tol) << dtypeName(d);
  }
}

TEST(DType, NamesParseBack) {
  for (DType d : {DType::F16, DType::F32, DType::BF16}) EXPECT_EQ(parseDType(dtypeName(d)), d);
  EXPECT_FALSE(parseDType("f64").has_value());
}

}  // namespace
}  // namespace foundry
