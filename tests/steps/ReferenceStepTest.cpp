// SdpaReferenceStep (materialised scores -> softmax -> P.V) against the CPU float64 reference. It is
// what FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE checks the fused kernels with, so it must hold on its own:
// decode and prefill, any head_dim, GQA/MQA, batch, both layouts, causal and not.
#include <gtest/gtest.h>

#include "support/AttentionHarness.h"

namespace foundry::test {
namespace {

constexpr Layout HM = Layout::HeadMajor;
constexpr Layout TM = Layout::TokenMajor;

AttentionCase make(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t qLen,
                   std::uint32_t kvLen, std::uint32_t headDim, DType dtype, Layout q = HM, Layout o = HM,
                   bool causal = true) {
  return attentionCase(batch, heads, kvHeads, qLen, kvLen, headDim, dtype, q, o, causal);
}

std::string caseName(const ::testing::TestParamInfo<AttentionCase>& param) { return param.param.name(); }

class ReferenceParity : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(ReferenceParity, MatchesCpuReference) {
  const AttentionCase& c = GetParam();
  const AttentionResult r = runReference(c);
  ASSERT_EQ(r.record.kernels.size(), 3u);
  EXPECT_TRUE(matchesReference(c, r));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceParity,
    ::testing::Values(make(1, 4, 1, 1, 100, 64, DType::F16),                    // decode, MQA
                      make(3, 8, 2, 1, 129, 128, DType::F32, TM, TM),           // decode, GQA 4
                      make(1, 8, 1, 33, 70, 80, DType::F32, TM, HM),            // any head_dim
                      make(3, 4, 4, 31, 31, 64, DType::F16),                    // kv_len = q_len
                      make(1, 4, 2, 128, 300, 128, DType::F16, HM, TM),         // prefix of 172
                      make(2, 4, 1, 32, 45, 64, DType::F16, TM, TM, false),     // not causal
                      // Past 65535 keys: one P·V loop pass per key would meet llvmpipe's loop limit.
                      make(1, 1, 1, 1, 70001, 64, DType::F32, HM, HM, false)),
    caseName);

}  // namespace
}  // namespace foundry::test
