// KV formats and layouts against the CPU float64 reference: bf16 storage (values far beyond the f16
// range, and values in f16's subnormal range), q, kv and o of separate types, and token-major caches
// [B, S, Hkv, D] read in place, through every kernel variant (subgroup decode at each load width,
// scalar decode, Split-K decode, subgroup prefill, Split-K prefill, coopmat2 prefill on bf16 operands,
// the materialised reference) and through KvAppendStep. Outputs are NaN-poisoned and rows past kv_len hold NaN (AttentionHarness).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <tuple>

#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/Runtime.h"
#include "foundry/StorageFormat.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

struct FormatCase {
  AttentionCase c;
  std::vector<std::pair<std::string, std::string>> knobs;  ///< forces a variant
  std::string label;
};

void PrintTo(const FormatCase& f, std::ostream* os) { *os << f.label << "_" << f.c.name(); }

FormatCase formatCase(std::string label, std::uint32_t qLen, std::uint32_t kvLen, DType kv,
                      std::optional<DType> q = std::nullopt, std::optional<DType> o = std::nullopt,
                      bool tokenMajorCache = false, std::vector<std::pair<std::string, std::string>> knobs = {}) {
  FormatCase f;
  f.c = attentionCase(2, 8, 2, qLen, kvLen, 64, kv);
  f.c.qType = q;
  f.c.oType = o;
  f.c.tokenMajorCache = tokenMajorCache;
  f.knobs = std::move(knobs);
  f.label = std::move(label);
  return f;
}

// bf16 inputs no f16 could hold: q and k in f16's subnormal range (a softmax scale brings the logits
// back to order 1) and v far beyond 65504. A kernel that took any of them through f16 would flush
// the first and overflow the second.
// (The mean of more keys' values is smaller: 4100 keys take values up to 1e8.)
FormatCase extremeBf16(FormatCase f, float valueMagnitude = 1e6f) {
  f.c.magnitude = 3e-5f;
  f.c.scale = 1.0f / (3e-5f * 3e-5f * 8.0f);
  f.c.valueMagnitude = valueMagnitude;
  f.label += "_extreme";
  return f;
}

// int8 V past f16's range (scales above 65504 / 127): the tensor-core kernel stages V's codes in f16
// and scales its products in f32, so no value it holds in f16 overflows (codes times scales staged in
// f16 would). q and k of magnitude 4 peak the softmax, so that the outputs lie beyond f16's range too.
FormatCase largeValues(FormatCase f) {
  f.c.magnitude = 4.0f;
  f.c.valueMagnitude = 4e6f;
  f.label += "_large_v";
  return f;
}

std::string formatName(const ::testing::TestParamInfo<FormatCase>& info) {
  return gtestSafe(info.param.label + "_" + info.param.c.name());
}

// int8 scales read once per subgroup step: 2 keys per subgroup and 4 steps, a step of 8 keys on
// subgroups of 8 and 32 alike (one lane cluster per key: 4 and 16 lanes).
std::vector<std::pair<std::string, std::string>> stepScales(std::vector<std::pair<std::string, std::string>> more) {
  more.insert(more.begin(), {{"FOUNDRY_FA_DECODE_STEP_SCALES", "1"},
                             {"FOUNDRY_FA_DECODE_KEYS_PER_WARP", "2"},
                             {"FOUNDRY_FA_DECODE_UNROLL", "4"},
                             {"FOUNDRY_FA_DECODE_VEC", "4"}});
  return more;
}
std::vector<std::pair<std::string, std::string>> halfProducts(std::vector<std::pair<std::string, std::string>> more) {
  more.insert(more.begin(), {"FOUNDRY_FA_DECODE_HALF_PRODUCTS", "1"});
  return stepScales(std::move(more));
}
FormatCase withWindow(FormatCase f, std::uint32_t left) {
  f.c.modifiers.push_back(window(left));
  return f;
}
FormatCase withModifiers(FormatCase f, std::vector<ModifierSpec> modifiers) {
  f.c.modifiers = std::move(modifiers);
  return f;
}
FormatCase withPages(FormatCase f, std::uint32_t rows) {
  f.c.pageSize = rows;
  return f;
}

FormatCase withHeadDim(FormatCase f, std::uint32_t d) {
  f.c.headDim = d;
  return f;
}
// Row `token` of K and of V, of every sequence's first KV head, holds infinities.
FormatCase withInfiniteRow(FormatCase f, std::uint32_t token) {
  const float inf = std::numeric_limits<float>::infinity();
  for (std::uint32_t b = 0; b < f.c.batch; ++b) {
    for (const Operand operand : {Operand::K, Operand::V}) {
      f.c.pokes.push_back({.operand = operand, .batch = b, .head = 0, .token = token, .value = inf});
    }
  }
  return f;
}
// GQA groups of `group` query heads (2 KV heads).
FormatCase withGroup(FormatCase f, std::uint32_t group) {
  f.c.kvHeads = 2;
  f.c.heads = 2 * group;
  return f;
}

class KvFormatParity : public ::testing::TestWithParam<FormatCase> {};

TEST_P(KvFormatParity, FlashMatchesCpuReference) {
  const FormatCase& f = GetParam();
  const bool tensorCores =
      std::find(f.knobs.begin(), f.knobs.end(), std::pair<std::string, std::string>{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}) !=
      f.knobs.end();
  if (tensorCores && !tensorCoreDecode(runtime().info(), f.c.dtype)) {
    GTEST_SKIP() << "the device has no cooperative matrices with the quad accumulator layout";
  }
  const bool coopMat2 =
      std::find(f.knobs.begin(), f.knobs.end(), std::pair<std::string, std::string>{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"}) !=
      f.knobs.end();
  if (coopMat2 && f.c.dtype == DType::BF16 && !runtime().info().coopMat2Bf16) {
    GTEST_SKIP() << "no bf16 operands in coopmat2 matrices here (the device's VK_KHR_shader_bfloat16, or a glslc that "
                    "compiles GL_EXT_bfloat16: FOUNDRY_GLSLC)";
  }
  const AttentionResult r = runFlash(f.c, AttentionOptions::fromEnvironment({f.knobs.begin(), f.knobs.end()}));
  EXPECT_TRUE(matchesReference(f.c, r)) << r.record.plan.describe();
  if (coopMat2) {
    EXPECT_TRUE(r.record.plan.prefillVariant.coopMat2) << r.record.plan.describe();
  }
  // bf16 q, K and V on the tensor cores take bf16 operands wherever the device and glslc have them.
  if (tensorCores && f.c.dtype == DType::BF16) {
    EXPECT_EQ(r.record.plan.decodeVariant.bf16Operands,
              f.c.qType.value_or(f.c.dtype) == DType::BF16 && runtime().info().coopMat2Bf16)
        << r.record.plan.describe();
  }
  if (quantized(f.c.dtype)) {
    EXPECT_LE(r.errorUnquantized.maxRel, quantizationBound(f.c.dtype)) << "against the values before quantization";
    EXPECT_GT(r.errorUnquantized.maxRel, r.error.maxRel) << "quantization must cost something, or the case proves nothing";
  }
  if (f.c.valueMagnitude > 65504.0f) {
    // The outputs really are beyond f16 (else the case would prove nothing).
    double most = 0;
    for (double w : r.want) most = std::max(most, std::abs(w));
    EXPECT_GT(most, 65504.0);
  }
}

TEST_P(KvFormatParity, ReferenceMatchesCpuReference) {
  const FormatCase& f = GetParam();
  if (!f.knobs.empty()) GTEST_SKIP() << "the knobs choose FlashAttentionStep variants";
  const AttentionResult r = runReference(f.c);
  EXPECT_TRUE(matchesReference(f.c, r));
}

constexpr DType F16 = DType::F16, BF16 = DType::BF16, F32 = DType::F32, I8 = DType::I8, Q8 = DType::Q8_0;
using Knobs = std::vector<std::pair<std::string, std::string>>;
// Split-K 5 merged in the last workgroup, `keys` of each split's chunk claimed.
Knobs claimsKnobs(const char* keys = "300") {
  return {{"FOUNDRY_FA_DECODE_SPLIT_K", "5"},
          {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"},
          {"FOUNDRY_FA_DECODE_CLAIMED_KEYS", keys}};
}

INSTANTIATE_TEST_SUITE_P(
    Decode, KvFormatParity,
    ::testing::Values(formatCase("bf16", 1, 300, BF16),
                      extremeBf16(formatCase("bf16", 1, 300, BF16)),
                      extremeBf16(formatCase("bf16_f32out", 1, 300, BF16, BF16, F32)),
                      formatCase("bf16_vec8", 1, 300, BF16, {}, {}, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "8"}}),
                      formatCase("bf16_vec2", 1, 300, BF16, {}, {}, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "2"}}),
                      formatCase("bf16_vec1", 1, 300, BF16, {}, {}, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "1"}}),
                      formatCase("bf16_scalar", 1, 300, BF16, {}, {}, false, Knobs{{"FOUNDRY_FA_DECODE_SCALAR", "1"}}),
                      formatCase("bf16_splitk", 1, 4100, BF16, {}, {}, false, Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}}),
                      formatCase("bf16_splitk_reduce", 1, 4100, BF16, {}, {}, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}),
                      formatCase("f16_f32out", 1, 300, F16, F16, F32),
                      formatCase("f32q_bf16kv_f16out", 1, 300, BF16, F32, F16),
                      formatCase("bf16q_f32kv", 1, 300, F32, BF16, BF16),
                      formatCase("f16_kvtok", 1, 300, F16, {}, {}, true),
                      formatCase("bf16_kvtok", 1, 300, BF16, {}, {}, true),
                      formatCase("f32_kvtok_scalar", 1, 300, F32, {}, {}, true, Knobs{{"FOUNDRY_FA_DECODE_SCALAR", "1"}}),
                      formatCase("f16_kvtok_splitk", 1, 4100, F16, {}, {}, true,
                                 Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}}),
                      // The keys past each split's own chunk claimed (DecodeVariant::claims): in pages, under a
                      // window, with hooks and per-sequence lengths that end before the claimed end begins.
                      withPages(formatCase("f16_claims_pages", 1, 4100, F16, {}, {}, false, claimsKnobs()), 32),
                      withWindow(formatCase("bf16_claims_window", 1, 4100, BF16, {}, {}, false, claimsKnobs("100")),
                                 1001),
                      withModifiers(formatCase("f16_claims_hooks", 1, 4100, F16, {}, {}, false, claimsKnobs()),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})})),
    formatName);

// int8 (blocks of 32 keys x 32 dimensions, scales beside) and q8_0 (blocks of one row's 32
// dimensions, scales inline), against the reference on the dequantized cache and, within the stated
// quantization bound, on the values before quantization. kv 300 leaves a partial last block.
INSTANTIATE_TEST_SUITE_P(
    DecodeQuantized, KvFormatParity,
    ::testing::Values(formatCase("int8", 1, 300, I8, F16, F16),
                      formatCase("int8_vec16", 1, 300, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "16"}}),
                      formatCase("int8_vec8", 1, 300, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "8"}}),
                      formatCase("int8_vec4", 1, 300, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "4"}}),
                      formatCase("int8_vec2", 1, 300, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "2"}}),
                      formatCase("int8_vec1", 1, 300, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "1"}}),
                      formatCase("int8_scalar", 1, 300, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_SCALAR", "1"}}),
                      formatCase("int8_splitk", 1, 4100, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}}),
                      formatCase("int8_scatter", 1, 4100, I8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_SCATTER", "1"}, {"FOUNDRY_FA_DECODE_VEC", "8"}, {"FOUNDRY_FA_DECODE_UNROLL", "4"},
                                       {"FOUNDRY_FA_DECODE_SPLIT_K", "3"}}),
                      // Scales read once per step of 8 keys: whole Split-K chunks, a window whose
                      // first key is not a multiple of the step (the steps start before it, its
                      // keys masked), and pages of 32 rows (int8 pages hold whole blocks).
                      formatCase("int8_step_scales", 1, 4100, I8, F16, F16, false, stepScales({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}})),
                      withWindow(formatCase("int8_step_scales_window", 1, 4100, I8, F16, F16, false,
                                            stepScales({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 1001),
                      withWindow(formatCase("int8_step_scales_window_scatter", 1, 4100, I8, F16, F16, false,
                                            stepScales({{"FOUNDRY_FA_DECODE_SCATTER", "1"}})), 333),
                      withPages(formatCase("int8_step_scales_pages", 1, 4100, I8, F16, F16, false,
                                           stepScales({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 32),
                      // And multiplied in packed f16 (half products), in loads of 4 and 16 codes.
                      formatCase("int8_half_products", 1, 4100, I8, F16, F16, false,
                                 halfProducts({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}})),
                      formatCase("int8_half_products_vec16", 1, 300, I8, F16, F16, false,
                                 halfProducts({{"FOUNDRY_FA_DECODE_VEC", "16"}})),
                      withWindow(formatCase("int8_half_products_window_scatter", 1, 4100, I8, F16, F16, false,
                                            halfProducts({{"FOUNDRY_FA_DECODE_SCATTER", "1"}})), 333),
                      withPages(formatCase("int8_half_products_pages", 1, 4100, I8, F32, F32, false,
                                           halfProducts({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 32),
                      // With the rescale skipped where no maximum grew (the H200's plan from D96 on).
                      formatCase("int8_half_products_lazy", 1, 4100, I8, F16, F16, false,
                                 halfProducts({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"},
                                               {"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}})),
                      withWindow(formatCase("int8_half_products_window_scatter_lazy", 1, 4100, I8, F16, F16, false,
                                            halfProducts({{"FOUNDRY_FA_DECODE_SCATTER", "1"},
                                                          {"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}})), 333),
                      // Score hooks and a distance bias on the products in f16, and sequences whose
                      // lengths end inside a step.
                      withModifiers(formatCase("int8_half_products_hooks", 1, 4100, I8, F16, F16, false,
                                               halfProducts({{"FOUNDRY_FA_DECODE_SCATTER", "1"}})),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      withModifiers(formatCase("int8_half_products_hooks_lazy", 1, 4100, I8, F16, F16, false,
                                               halfProducts({{"FOUNDRY_FA_DECODE_SCATTER", "1"},
                                                             {"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}})),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      // K's codes through integer dot products, V's weighted in packed f16.
                      formatCase("int8_half_products_idot", 1, 4100, I8, F16, F16, false,
                                 halfProducts({{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "5"}})),
                      withWindow(formatCase("int8_half_products_idot_window_scatter_lazy", 1, 4100, I8, F16, F16, false,
                                            halfProducts({{"FOUNDRY_FA_DECODE_INT8_DOT", "1"},
                                                          {"FOUNDRY_FA_DECODE_SCATTER", "1"},
                                                          {"FOUNDRY_FA_DECODE_LAZY_RESCALE", "1"}})), 333),
                      withModifiers(formatCase("int8_half_products_idot_hooks", 1, 4100, I8, F32, F32, false,
                                               halfProducts({{"FOUNDRY_FA_DECODE_INT8_DOT", "1"},
                                                             {"FOUNDRY_FA_DECODE_VEC", "16"}})),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      formatCase("int8_qshared_u8", 1, 4100, I8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_Q_SHARED", "1"}, {"FOUNDRY_FA_DECODE_VEC", "16"},
                                       {"FOUNDRY_FA_DECODE_UNROLL", "8"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "3"}}),
                      formatCase("int8_idot", 1, 300, I8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}, {"FOUNDRY_FA_DECODE_VEC", "16"}}),
                      formatCase("int8_idot_vec4", 1, 300, I8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}, {"FOUNDRY_FA_DECODE_VEC", "4"}}),
                      formatCase("int8_idot_splitk", 1, 4100, I8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "5"}}),
                      formatCase("int8_idot_f32", 1, 300, I8, F32, F32, false, Knobs{{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}}),
                      formatCase("int8_f32", 1, 300, I8, F32, F32),
                      formatCase("int8_kvtok", 1, 300, I8, F16, F16, true),
                      formatCase("q8_0", 1, 300, Q8, F16, F16),
                      formatCase("q8_0_vec8", 1, 300, Q8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "8"}}),
                      // Scores summed once per key (the Hopper plan for 8-bit rows of 128), on the
                      // Selector's 8 lanes per key (a forced key count would fit one subgroup size only).
                      formatCase("q8_0_scatter", 1, 300, Q8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_SCATTER", "1"}, {"FOUNDRY_FA_DECODE_VEC", "8"}, {"FOUNDRY_FA_DECODE_UNROLL", "4"}}),
                      formatCase("q8_0_vec2", 1, 300, Q8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_VEC", "2"}}),
                      formatCase("q8_0_scalar", 1, 300, Q8, F16, F16, false, Knobs{{"FOUNDRY_FA_DECODE_SCALAR", "1"}}),
                      formatCase("q8_0_idot", 1, 300, Q8, F16, F16, false,
                                 Knobs{{"FOUNDRY_FA_DECODE_INT8_DOT", "1"}, {"FOUNDRY_FA_DECODE_VEC", "8"}}),
                      formatCase("q8_0_splitk", 1, 4100, Q8, BF16, BF16, false, Knobs{{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}}),
                      formatCase("q8_0_kvtok", 1, 300, Q8, F16, F16, true)),
    formatName);

// Decode on the tensor cores (FOUNDRY_FA_DECODE_TENSOR_CORES; skipped where the device has no
// cooperative matrices with the quad layout): int8 and f16, Split-K, f32 q and output, a window whose
// first key is not a multiple of the 16-key tile, score hooks with lengths ending inside a tile, pages
// and token-major rows.
Knobs tensorCores(Knobs more) {
  more.insert(more.begin(), {"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"});
  return more;
}
INSTANTIATE_TEST_SUITE_P(
    DecodeTensorCores, KvFormatParity,
    ::testing::Values(formatCase("int8_tc", 1, 4100, I8, F16, F16, false, tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"}})),
                      formatCase("int8_tc_f32", 1, 300, I8, F32, F32, false, tensorCores({})),
                      withWindow(formatCase("int8_tc_window", 1, 4100, I8, F16, F16, false,
                                            tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 1001),
                      withModifiers(formatCase("int8_tc_hooks", 1, 4100, I8, F16, F16, false, tensorCores({})),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      withPages(formatCase("int8_tc_pages", 1, 4100, I8, F16, F16, false,
                                           tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 32),
                      formatCase("int8_tc_kvtok", 1, 300, I8, F16, F16, true, tensorCores({})),
                      // f16 and bf16 with the keys past each split's own chunk claimed a round at a time.
                      withPages(formatCase("f16_tc_claims_pages", 1, 4100, F16, {}, {}, false,
                                           tensorCores(claimsKnobs())), 32),
                      withWindow(formatCase("bf16_tc_claims_window", 1, 4100, BF16, {}, {}, false,
                                            tensorCores(claimsKnobs("100"))), 1001),
                      withModifiers(formatCase("f16_tc_claims_hooks", 1, 4100, F16, F32, F32, false,
                                               tensorCores(claimsKnobs())),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      withModifiers(formatCase("int8_tc_claims_hooks", 1, 4100, I8, F16, F16, false,
                                               tensorCores(claimsKnobs())),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      withPages(formatCase("int8_tc_claims_pages", 1, 4100, I8, F16, F16, false,
                                           tensorCores(claimsKnobs("600"))), 64),
                      withWindow(formatCase("int8_tc_claims_window", 1, 4100, I8, F32, F32, false,
                                            tensorCores(claimsKnobs("100"))), 1001),
                      // Two tiles at a time: ranges that end inside a pair, a window, pages, hooks.
                      withModifiers(formatCase("int8_tc_pairs", 1, 4100, I8, F16, F16, false,
                                               tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"},
                                                            {"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}})),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      withWindow(formatCase("int8_tc_pairs_window", 1, 4100, I8, F16, F16, false,
                                            tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                         {"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}})), 1001),
                      withPages(formatCase("int8_tc_pairs_pages", 1, 4100, I8, F16, F16, false,
                                           tensorCores({{"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}})), 32),
                      formatCase("int8_tc_pairs_f32", 1, 300, I8, F32, F32, false,
                                 tensorCores({{"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}})),
                      largeValues(formatCase("int8_tc_pairs", 1, 4100, I8, F32, F32, false,
                                             tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                          {"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}}))),
                      // Four tiles in flight: a round of four adjacent tiles spans two scale blocks.
                      withPages(formatCase("int8_tc_unroll4", 1, 4100, I8, F16, F16, false,
                                           tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                        {"FOUNDRY_FA_DECODE_UNROLL", "4"}})), 32),
                      withHeadDim(formatCase("int8_tc_d128_unroll4", 1, 4100, I8, F16, F16, false,
                                             tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"},
                                                          {"FOUNDRY_FA_DECODE_UNROLL", "4"}})),
                                  128),
                      // Rows of 128, where the Hopper rows take the pairs and V from registers by default.
                      withHeadDim(formatCase("int8_tc_d128", 1, 4100, I8, F16, F16, false,
                                             tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 128),
                      withPages(withHeadDim(formatCase("int8_tc_d128_pages", 1, 4100, I8, F16, F16, false,
                                                       tensorCores({})), 128), 64),
                      // V's fragments built from each lane's loads: alone with hooks, with the pairs, a
                      // window and f32 q and output, and token-major rows.
                      withModifiers(withHeadDim(formatCase("int8_tc_d128_vregs", 1, 4100, I8, F16, F16, false,
                                                           tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"},
                                                                        {"FOUNDRY_FA_DECODE_TILE_PAIRS", "0"},
                                                                        {"FOUNDRY_FA_DECODE_VALUE_REGISTERS", "1"}})),
                                                128),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      withWindow(withHeadDim(formatCase("int8_tc_d128_vregs_pairs", 1, 4100, I8, F32, F32, false,
                                                        tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                                     {"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"},
                                                                     {"FOUNDRY_FA_DECODE_VALUE_REGISTERS", "1"}})),
                                             128),
                                 1001),
                      withHeadDim(formatCase("int8_tc_d128_vregs_kvtok", 1, 300, I8, F16, F16, true,
                                             tensorCores({{"FOUNDRY_FA_DECODE_VALUE_REGISTERS", "1"}})),
                                  128),
                      // V staged in halves (the Hopper row's default at 128 where the f16 layout is not
                      // known): alone, with the pairs and a window, and V whole.
                      withModifiers(withHeadDim(formatCase("int8_tc_d128_halves", 1, 4100, I8, F16, F16, false,
                                                           tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "5"},
                                                                        {"FOUNDRY_FA_DECODE_TILE_PAIRS", "0"},
                                                                        {"FOUNDRY_FA_DECODE_VALUE_HALVES", "1"}})),
                                                128),
                                    {softCap(20.0), keyLengths({4093, 1001})}),
                      withWindow(withHeadDim(formatCase("int8_tc_d128_halves_pairs", 1, 4100, I8, F32, F32, false,
                                                        tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                                     {"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"},
                                                                     {"FOUNDRY_FA_DECODE_VALUE_HALVES", "1"}})),
                                             128),
                                 1001),
                      withHeadDim(formatCase("int8_tc_d128_whole", 1, 4100, I8, F16, F16, false,
                                             tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                          {"FOUNDRY_FA_DECODE_VALUE_HALVES", "0"},
                                                          {"FOUNDRY_FA_DECODE_VALUE_REGISTERS", "0"}})),
                                  128),
                      // Groups of up to 4 heads take q's two bytes in one product's columns, groups of
                      // 8 in two products; a group of 3 leaves a column of each half empty.
                      withModifiers(withGroup(formatCase("int8_tc_group8", 1, 4100, I8, F16, F16, false,
                                                         tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                                      {"FOUNDRY_FA_DECODE_TILE_PAIRS", "1"}})), 8),
                                    {softCap(20.0), keyLengths({4093, 1001})}),
                      withWindow(withGroup(formatCase("int8_tc_group3", 1, 4100, I8, F32, F32, false,
                                                      tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 3), 1001),
                      formatCase("f16_tc", 1, 4100, F16, F16, F16, false, tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}})),
                      // bf16 through f16 products, a power of two per tile: values beyond f16's range and in
                      // its subnormal range, pages, hooks, token-major rows, and a window whose first tile
                      // holds a hidden row of infinities (rows before the range set no power and reach no
                      // product).
                      extremeBf16(formatCase("bf16_tc", 1, 4100, BF16, BF16, BF16, false,
                                             tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "4"}})), 1e8f),
                      withPages(extremeBf16(formatCase("bf16_tc_pages_f32out", 1, 4100, BF16, BF16, F32, false,
                                                       tensorCores({})), 1e8f), 64),
                      withModifiers(withHeadDim(formatCase("bf16_tc_d128_hooks", 1, 4100, BF16, F32, F32, false,
                                                           tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 128),
                                    {softCap(20.0), alibi(), keyLengths({4093, 1001})}),
                      formatCase("bf16_tc_kvtok", 1, 300, BF16, F16, BF16, true, tensorCores({})),
                      withInfiniteRow(withWindow(formatCase("bf16_tc_window", 1, 4100, BF16, BF16, BF16, false,
                                                            tensorCores({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}})), 1001),
                                      3090),
                      formatCase("f16_tc_kvtok_f32out", 1, 300, F16, F16, F32, true, tensorCores({})),
                      withPages(formatCase("f16_tc_pages", 1, 4100, F16, F16, F16, false, tensorCores({})), 16)),
    formatName);

// bf16 q, K and V as the operands of coopmat2 matrices (VK_KHR_shader_bfloat16), exact products of every
// bf16 value: values beyond f16's range and in its subnormal range, each scope and staging depth (0: tiles
// straight from the cache), Split-K, pages, token-major rows, score hooks and a window, wider rows.
std::vector<std::pair<std::string, std::string>> bf16CoopMat2(const char* scope, const char* stages,
                                                              std::vector<std::pair<std::string, std::string>> more = {}) {
  more.insert(more.begin(), {{"FOUNDRY_FA_PREFILL_COOPMAT2", "1"},
                             {"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", scope},
                             {"FOUNDRY_FA_PREFILL_STAGES", stages}});
  return more;
}
INSTANTIATE_TEST_SUITE_P(
    PrefillCoopMat2Bf16, KvFormatParity,
    ::testing::Values(
        extremeBf16(formatCase("bf16_cm2_sg", 37, 100, BF16, BF16, BF16, false, bf16CoopMat2("subgroup", "2"))),
        extremeBf16(formatCase("bf16_cm2_wg_unstaged", 37, 100, BF16, BF16, BF16, false, bf16CoopMat2("workgroup", "0"))),
        extremeBf16(formatCase("bf16_cm2_wg_f32out", 37, 100, BF16, BF16, F32, false, bf16CoopMat2("workgroup", "1"))),
        formatCase("bf16_cm2_sg_splitk", 7, 1000, BF16, BF16, BF16, false,
                   bf16CoopMat2("subgroup", "1", {{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}})),
        formatCase("bf16_cm2_wg_unstaged_splitk", 7, 1000, BF16, BF16, BF16, false,
                   bf16CoopMat2("workgroup", "0", {{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}})),
        withPages(extremeBf16(formatCase("bf16_cm2_sg_pages", 37, 100, BF16, BF16, BF16, false,
                                         bf16CoopMat2("subgroup", "2"))), 16),
        formatCase("bf16_cm2_sg_kvtok_f32out", 37, 100, BF16, BF16, F32, true, bf16CoopMat2("subgroup", "1")),
        withModifiers(withHeadDim(formatCase("bf16_cm2_d128_hooks", 37, 300, BF16, BF16, BF16, false,
                                             bf16CoopMat2("subgroup", "2")), 128),
                      {softCap(20.0), alibi(), window(50)}),
        withHeadDim(formatCase("bf16_cm2_d256", 37, 300, BF16, BF16, BF16, false, bf16CoopMat2("workgroup", "0")), 256),
        withHeadDim(formatCase("bf16_cm2_d256_sg", 37, 300, BF16, BF16, BF16, false,
                               bf16CoopMat2("subgroup", "2", {{"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "16"}})), 256),
        withHeadDim(formatCase("bf16_cm2_d192", 37, 300, BF16, BF16, BF16, false, bf16CoopMat2("subgroup", "2")), 192),
        withHeadDim(formatCase("bf16_cm2_d80", 37, 300, BF16, BF16, BF16, false, bf16CoopMat2("subgroup", "1")), 80),
        withHeadDim(formatCase("bf16_cm2_d96", 37, 300, BF16, BF16, BF16, false, bf16CoopMat2("subgroup", "1")), 96)),
    formatName);

INSTANTIATE_TEST_SUITE_P(
    PrefillQuantized, KvFormatParity,
    ::testing::Values(formatCase("int8", 37, 100, I8, F16, F16),
                      formatCase("int8_splitk", 7, 1000, I8, F16, F16, false, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}),
                      formatCase("int8_kvtok_f32out", 37, 100, I8, F16, F32, true),
                      formatCase("q8_0", 37, 100, Q8, F16, F16),
                      formatCase("q8_0_kvtok", 37, 100, Q8, BF16, BF16, true)),
    formatName);

INSTANTIATE_TEST_SUITE_P(
    Prefill, KvFormatParity,
    ::testing::Values(formatCase("bf16", 37, 100, BF16),
                      extremeBf16(formatCase("bf16", 37, 100, BF16)),
                      formatCase("bf16_splitk", 7, 1000, BF16, {}, {}, false, Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}),
                      formatCase("f16_f32out", 37, 100, F16, F16, F32),
                      formatCase("f16q_bf16kv_bf16out", 37, 100, BF16, F16, BF16),
                      formatCase("f16_kvtok", 37, 100, F16, {}, {}, true),
                      formatCase("bf16_kvtok_f32out", 37, 100, BF16, {}, F32, true),
                      formatCase("f32_kvtok_splitk", 7, 1000, F32, {}, {}, true,
                                 Knobs{{"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}})),
    formatName);

// ---- The LSE of a bf16 call merges like any other (MergeStep reads bf16 parts).

TEST(KvFormat, Bf16LseMatchesTheReference) {
  FormatCase f = formatCase("bf16", 1, 300, BF16);
  f.c.lse = true;
  const AttentionResult r = runFlash(f.c, AttentionOptions());
  EXPECT_TRUE(matchesReference(f.c, r));
  EXPECT_EQ(lseMismatch(r.lseGot, r.lseWant, lseBound(f.c, r)), "");
}

// ---- What the format description says.

TEST(StorageFormat, DescribesEachFormatOnce) {
  EXPECT_EQ(storageFormat(F16).bytes, 2u);
  EXPECT_EQ(storageFormat(BF16).bytes, 2u);
  EXPECT_EQ(storageFormat(F32).bytes, 4u);
  EXPECT_EQ(storageFormat(BF16).maxLoadWidth, 8u);
  EXPECT_EQ(storageFormat(F32).maxLoadWidth, 4u);
  EXPECT_EQ(glsl::view(BF16, 4), "uvec2");
  EXPECT_EQ(glsl::view(F32, 4), "vec4");
  EXPECT_EQ(glsl::view(BF16, 1), "uint16_t");
  for (DType t : {F16, BF16, F32}) {
    const auto poison = nanPoison(t, 3);
    const auto back = decodeElements(poison, t);
    ASSERT_EQ(back.size(), 3u);
    for (float x : back) EXPECT_TRUE(std::isnan(x)) << dtypeName(t);
  }
  DeviceInfo no16 = devicePreset("lavapipe");
  no16.storage16Bit = false;
  EXPECT_EQ(unsupportedStorageReason(F32, no16), "");
  EXPECT_NE(unsupportedStorageReason(BF16, no16).find("storageBuffer16BitAccess"), std::string::npos);
  EXPECT_THROW(requireStorage(F16, no16, "q"), UnsupportedError);
}

// ---- KvAppendStep writes new rows in any float type into a cache of any format and layout.

struct AppendCase {
  DType rows, cache;
  bool tokenMajorCache;
};

class KvAppendFormats : public ::testing::TestWithParam<AppendCase> {};

TEST_P(KvAppendFormats, WritesEachRowRoundedToTheCacheFormat) {
  const AppendCase& a = GetParam();
  Runtime& rt = runtime();
  const std::int64_t B = 2, H = 3, T = 5, D = 64, S = 16, pos = 7;
  const Tensor kNew = rt.allocate("k_new", a.rows, {B, H, T, D}, Layout::HeadMajor);
  const Tensor vNew = rt.allocate("v_new", a.rows, {B, H, T, D}, Layout::HeadMajor);
  const std::vector<std::int64_t> cacheDims = a.tokenMajorCache ? std::vector<std::int64_t>{B, S, H, D}
                                                                : std::vector<std::int64_t>{B, H, S, D};
  const Layout cacheLayout = a.tokenMajorCache ? Layout::TokenMajor : Layout::KvCache;
  const Tensor kCache = rt.allocate("k_cache", a.cache, cacheDims, cacheLayout);
  const Tensor vCache = rt.allocate("v_cache", a.cache, cacheDims, cacheLayout);
  // Large and small values alike: what bf16 and f32 caches keep and f16 would not.
  std::vector<float> k = randomVector(kNew.numel(), 5, -1.0f, 1.0f), v = randomVector(vNew.numel(), 6, -1.0f, 1.0f);
  if (a.rows != F16 && a.cache != F16) {
    for (std::size_t i = 0; i < k.size(); i += 7) k[i] *= 1e6f, v[i] *= 1e-6f;
  }
  rt.upload(kNew, k);
  rt.upload(vNew, v);
  rt.poison(kCache);
  rt.poison(vCache);
  KvAppendStep step(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  step.run(ctx, kNew, vNew, kCache, vCache, pos, std::nullopt);
  dispatcher->submit();
  const auto kGot = rt.download(kCache), vGot = rt.download(vCache);
  auto cacheAt = [&](std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
    return a.tokenMajorCache ? ((b * S + s) * H + h) * D + d : ((b * H + h) * S + s) * D + d;
  };
  auto inCache = [&](float x) { return decodeElements(encodeElements(std::vector<float>{x}, a.cache), a.cache)[0]; };
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t s = 0; s < S; ++s) {
        for (std::int64_t d = 0; d < D; ++d) {
          const std::size_t at = cacheAt(b, h, s, d);
          if (s < pos || s >= pos + T) {  // untouched rows keep their poison
            ASSERT_TRUE(std::isnan(kGot[at]) && std::isnan(vGot[at])) << b << " " << h << " " << s << " " << d;
            continue;
          }
          const std::size_t from = ((b * H + h) * T + (s - pos)) * D + d;
          const float kIn = decodeElements(encodeElements(std::vector<float>{k[from]}, a.rows), a.rows)[0];
          const float vIn = decodeElements(encodeElements(std::vector<float>{v[from]}, a.rows), a.rows)[0];
          ASSERT_EQ(kGot[at], inCache(kIn)) << b << " " << h << " " << s << " " << d;
          ASSERT_EQ(vGot[at], inCache(vIn)) << b << " " << h << " " << s << " " << d;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvAppendFormats,
                         ::testing::Values(AppendCase{BF16, BF16, false}, AppendCase{F32, BF16, false},
                                           AppendCase{F32, BF16, true}, AppendCase{F16, F16, true},
                                           AppendCase{BF16, F32, true}, AppendCase{F32, F16, false}),
                         [](const ::testing::TestParamInfo<AppendCase>& p) {
                           return fmt::format("{}_rows_{}_cache{}", dtypeName(p.param.rows), dtypeName(p.param.cache),
                                              p.param.tokenMajorCache ? "_tok" : "");
                         });

// ---- KvAppendStep quantizes into int8 and q8_0 caches: a prefill of 40 rows, three single-token
// appends of rows four times larger (the int8 block of keys 32..63 must grow its scale and requantize
// the rows it already holds), then 30 more rows across the next block boundary.

struct QuantAppendCase {
  DType rows, cache;
  bool tokenMajorCache;
  bool rope;
};

// The largest |value| of the quantization block holding element (s, d) of `x`, rows [0, rows) of D values.
float blockAbsmax(std::span<const float> x, std::int64_t s, std::int64_t d, std::int64_t rows, std::int64_t D,
                  const QuantBlocks& blocks) {
  float absmax = 0;
  const std::int64_t s0 = s / blocks.keys * blocks.keys, d0 = d / blocks.dims * blocks.dims;
  for (std::int64_t ss = s0; ss < std::min<std::int64_t>(s0 + blocks.keys, rows); ++ss) {
    for (std::int64_t dd = d0; dd < std::min<std::int64_t>(d0 + blocks.dims, D); ++dd) {
      absmax = std::max(absmax, std::abs(x[std::size_t(ss * D + dd)]));
    }
  }
  return absmax;
}

// A poisoned [1, 1, 64, 64] K and V cache of an int8 or q8_0 format, and KvAppendStep's appends of f32 rows.
struct SmallQuantCache {
  static constexpr std::int64_t S = 64, D = 64;
  explicit SmallQuantCache(DType format)
      : k(runtime().allocate("k_cache", format, {1, 1, S, D}, Layout::KvCache)),
        v(runtime().allocate("v_cache", format, {1, 1, S, D}, Layout::KvCache)),
        blocks(storageFormat(format).blocks),
        step(runtime().info(), runtime().snippets()) {
    runtime().poison(k);
    runtime().poison(v);
  }
  /// Appends rows [pos, pos + rows) of K and V, `kRows` and `vRows` of D values each.
  void append(const std::vector<float>& kRows, const std::vector<float>& vRows, std::uint32_t pos) {
    Runtime& rt = runtime();
    const std::int64_t rows = std::int64_t(kRows.size()) / D;
    const Tensor kNew = rt.allocate("k_new", DType::F32, {1, 1, rows, D}, Layout::HeadMajor);
    const Tensor vNew = rt.allocate("v_new", DType::F32, {1, 1, rows, D}, Layout::HeadMajor);
    rt.upload(kNew, kRows);
    rt.upload(vNew, vRows);
    auto dispatcher = rt.dispatcher();
    DeviceWorkspace workspace(rt);
    StepContext ctx{*dispatcher, workspace, &rt};
    step.run(ctx, kNew, vNew, k, v, pos, std::nullopt);
    dispatcher->submit();
  }
  Tensor k, v;
  const QuantBlocks& blocks;
  KvAppendStep step;
};

class KvQuantAppend : public ::testing::TestWithParam<QuantAppendCase> {};

TEST_P(KvQuantAppend, EveryValueWithinItsBlockStepsOfTheRowsAppended) {
  const QuantAppendCase& a = GetParam();
  Runtime& rt = runtime();
  const std::int64_t B = 2, H = 2, D = 64, S = 96;
  const std::vector<std::int64_t> cacheDims = a.tokenMajorCache ? std::vector<std::int64_t>{B, S, H, D}
                                                                : std::vector<std::int64_t>{B, H, S, D};
  const Layout cacheLayout = a.tokenMajorCache ? Layout::TokenMajor : Layout::KvCache;
  const Tensor kCache = rt.allocate("k_cache", a.cache, cacheDims, cacheLayout);
  const Tensor vCache = rt.allocate("v_cache", a.cache, cacheDims, cacheLayout);
  rt.poison(kCache);
  rt.poison(vCache);
  const RopeSpec spec{};
  std::optional<KvAppendStep::Rope> rope;
  if (a.rope) rope = KvAppendStep::Rope{spec, makeRopeTable(rt, spec, D), 0};
  KvAppendStep step(rt.info(), rt.snippets());
  // want[k or v][b][h][s][d], head-major: the rows as appended (K rotated at its position).
  std::vector<float> want[2];
  for (auto& w : want) w.assign(std::size_t(B * H * S * D), std::numeric_limits<float>::quiet_NaN());
  std::uint32_t pos = 0;
  for (const auto& [tokens, magnitude] : {std::pair{40, 1.0f}, std::pair{1, 4.0f}, std::pair{1, 4.0f},
                                          std::pair{1, 4.0f}, std::pair{30, 2.0f}}) {
    const Tensor kNew = rt.allocate("k_new", a.rows, {B, H, tokens, D}, Layout::HeadMajor);
    const Tensor vNew = rt.allocate("v_new", a.rows, {B, H, tokens, D}, Layout::HeadMajor);
    std::vector<float> k = randomVector(kNew.numel(), 11 + pos, -magnitude, magnitude);
    std::vector<float> v = randomVector(vNew.numel(), 12 + pos, -magnitude, magnitude);
    k = decodeElements(encodeElements(k, a.rows), a.rows);
    v = decodeElements(encodeElements(v, a.rows), a.rows);
    rt.upload(kNew, k);
    rt.upload(vNew, v);
    if (rope) {
      rope->pos0 = pos;
      std::vector<std::uint32_t> at(std::size_t(B * H * tokens));
      for (std::size_t i = 0; i < at.size(); ++i) at[i] = pos + static_cast<std::uint32_t>(i % tokens);
      cpuRope(spec, D, k, at);
    }
    for (std::int64_t r = 0; r < B * H * tokens; ++r) {
      const std::int64_t bh = r / tokens, t = r % tokens;
      std::copy_n(k.begin() + r * D, D, want[0].begin() + (bh * S + pos + t) * D);
      std::copy_n(v.begin() + r * D, D, want[1].begin() + (bh * S + pos + t) * D);
    }
    auto dispatcher = rt.dispatcher();
    DeviceWorkspace workspace(rt);
    StepContext ctx{*dispatcher, workspace, &rt};
    step.run(ctx, kNew, vNew, kCache, vCache, pos, rope);
    dispatcher->submit();
    pos += tokens;
  }
  const QuantBlocks& blocks = storageFormat(a.cache).blocks;
  for (int which = 0; which < 2; ++which) {
    const std::vector<float> got = rt.download(which ? vCache : kCache);
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t s = 0; s < S; ++s) {
          for (std::int64_t d = 0; d < D; ++d) {
            const std::size_t at = a.tokenMajorCache ? ((b * S + s) * H + h) * D + d : ((b * H + h) * S + s) * D + d;
            const std::size_t wantAt = ((b * H + h) * S + s) * D + d;
            if (s >= pos) {  // rows never appended keep their poison
              ASSERT_TRUE(std::isnan(got[at])) << which << " " << b << " " << h << " " << s << " " << d;
              continue;
            }
            // One step of the block is its largest |value| / 127. Each quantization a value goes
            // through costs at most half a step of the scale then; a row of the block 32..63 goes
            // through up to four (the prefill, then each growing single-token append): two steps.
            const float absmax = blockAbsmax(std::span(want[which]).subspan(std::size_t((b * H + h) * S * D)), s, d,
                                             pos, D, blocks);
            ASSERT_LE(std::abs(got[at] - want[which][wantAt]), 2.0f * absmax / 127.0f)
                << (which ? "v" : "k") << " " << b << " " << h << " " << s << " " << d << " got " << got[at]
                << " want " << want[which][wantAt];
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvQuantAppend,
                         ::testing::Values(QuantAppendCase{F16, I8, false, false}, QuantAppendCase{F32, I8, true, true},
                                           QuantAppendCase{BF16, I8, false, true}, QuantAppendCase{F16, Q8, false, true},
                                           QuantAppendCase{F32, Q8, true, false}),
                         [](const ::testing::TestParamInfo<QuantAppendCase>& p) {
                           return fmt::format("{}_rows_{}_cache{}{}", dtypeName(p.param.rows), dtypeName(p.param.cache),
                                              p.param.tokenMajorCache ? "_tok" : "", p.param.rope ? "_rope" : "");
                         });

// Blocks of tiny values (f16 scales in the subnormal range, or below f16's smallest) and of values near
// the largest an f16 scale holds: a block's scale is the f16 at or above absmax / 127, so every value
// lands within half a step of its code (none clipped at 127, none flushed to 0 with a scale of 0), and
// KvAppendStep's codes are the host codec's bit for bit.
class KvQuantAppendScales : public ::testing::TestWithParam<DType> {};

TEST_P(KvQuantAppendScales, EveryBlockKeepsItsValuesWithinHalfAStep) {
  const std::int64_t D = SmallQuantCache::D, tokens = 40;
  for (const float magnitude : {3e-7f, 1e-5f, 8e6f}) {
    SCOPED_TRACE(magnitude);
    SmallQuantCache cache(GetParam());
    const std::vector<float> k = randomVector(std::size_t(tokens * D), 31, -magnitude, magnitude);
    cache.append(k, randomVector(k.size(), 32, -magnitude, magnitude), 0);
    std::vector<float> host(std::size_t(SmallQuantCache::S * D), std::numeric_limits<float>::quiet_NaN());
    std::copy(k.begin(), k.end(), host.begin());  // the rows never written stay NaN
    const std::vector<float> hostRead = dequantizeKv(quantizeKv(host, cache.k), cache.k);
    const std::vector<float> got = runtime().download(cache.k);
    for (std::int64_t s = 0; s < tokens; ++s) {
      for (std::int64_t d = 0; d < D; ++d) {
        const std::size_t at = std::size_t(s * D + d);
        ASSERT_EQ(std::memcmp(&got[at], &hostRead[at], sizeof(float)), 0)
            << "row " << s << " dim " << d << ": KvAppendStep read " << got[at] << ", the host codec " << hostRead[at];
        // Half a step of the scale: the f16 at or above absmax / 127, at most one f16 spacing above it.
        const float absmax = blockAbsmax(k, s, d, tokens, D, cache.blocks);
        const double halfStep = 0.5 * (absmax / 127.0 * (1.0 + 1.0 / 1024.0) + std::ldexp(1.0, -24));
        ASSERT_LE(std::abs(got[at] - k[at]), halfStep * 1.0001)
            << "row " << s << " dim " << d << " got " << got[at] << " want " << k[at];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvQuantAppendScales, ::testing::Values(DType::I8, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtypeName(p.param)); });

// A rollback (speculative decoding's rejected tokens): rows written over others of a block, where the
// block's largest value was among those written over. The block's scale follows the rows it now holds:
// the rows written since are within two steps of the current rows' largest |value| / 127, not of the
// outlier's (0.79, which left them up to 0.39 off).
class KvQuantAppendRollback : public ::testing::TestWithParam<DType> {};

TEST_P(KvQuantAppendRollback, ABlockWrittenOverForgetsTheOutlierItHeld) {
  SmallQuantCache cache(GetParam());
  const std::int64_t D = SmallQuantCache::D, rows = 42;
  std::vector<float> want(std::size_t(rows * D));
  // 40 rows with an outlier of 100 in row 36; then rows 34..41 again, without it.
  for (const auto& [pos, tokens, seed] : {std::tuple{0u, 40, 41u}, std::tuple{34u, 8, 42u}}) {
    std::vector<float> k = randomVector(std::size_t(tokens * D), seed, -1.0f, 1.0f);
    if (pos == 0) k[36 * D + 5] = 100.0f;
    std::copy(k.begin(), k.end(), want.begin() + std::ptrdiff_t(pos * D));
    cache.append(k, randomVector(k.size(), seed + 10, -1.0f, 1.0f), pos);
  }
  const std::vector<float> got = runtime().download(cache.k);
  for (std::int64_t s = 0; s < rows; ++s) {
    for (std::int64_t d = 0; d < D; ++d) {
      // Rows 32 and 33 were quantized beside the outlier, to its step; no later scale brings that back.
      const bool keptBesideOutlier = s >= 32 && s < 34 && d < 32 && cache.blocks.keys > 1;
      const float bound = 2.0f * blockAbsmax(want, s, d, rows, D, cache.blocks) / 127.0f +
                          (keptBesideOutlier ? 0.5f * 100.0f / 127.0f : 0.0f);
      ASSERT_LE(std::abs(got[s * D + d] - want[s * D + d]), bound)
          << "row " << s << " dim " << d << " got " << got[s * D + d] << " want " << want[s * D + d];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvQuantAppendRollback, ::testing::Values(DType::I8, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtypeName(p.param)); });

// A NaN, an infinity or a value beyond what an f16 scale holds, appended into an int8 or q8_0 cache, gives
// its block a NaN scale (codes cannot hold it), so every value read from the block is NaN, and later appends that grow the block keep it NaN; the
// other blocks keep their values.
class KvQuantAppendNonFinite : public ::testing::TestWithParam<DType> {};

TEST_P(KvQuantAppendNonFinite, ABlockWithANonFiniteValueReadsAsNaN) {
  SmallQuantCache cache(GetParam());
  const std::int64_t D = SmallQuantCache::D;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // A NaN in K row 5, a value beyond what an f16 scale holds (127 x 65504) in K row 10, an infinity in V
  // row 36; then one row four times larger into the block of rows 32..63 (its scale grows).
  std::vector<float> k = randomVector(std::size_t(40 * D), 21, -1.0f, 1.0f), v = randomVector(k.size(), 22, -1.0f, 1.0f);
  k[5 * D + 3] = nan;
  k[10 * D + 50] = 2e7f;
  v[36 * D + 40] = -inf;
  cache.append(k, v, 0);
  cache.append(randomVector(std::size_t(D), 23, -4.0f, 4.0f), randomVector(std::size_t(D), 24, -4.0f, 4.0f), 40);
  using Bad = std::vector<std::pair<std::int64_t, std::int64_t>>;  // (row, dim) of each bad value
  for (const auto& [tensor, bad] : {std::pair{cache.k, Bad{{5, 3}, {10, 50}}}, std::pair{cache.v, Bad{{36, 40}}}}) {
    const std::vector<float> got = runtime().download(tensor);
    for (std::int64_t s = 0; s < 41; ++s) {
      for (std::int64_t d = 0; d < D; ++d) {
        bool inBlock = false;
        for (const auto& [row, dim] : bad) {
          inBlock |= s / cache.blocks.keys == row / cache.blocks.keys && d / cache.blocks.dims == dim / cache.blocks.dims;
        }
        EXPECT_EQ(std::isnan(got[s * D + d]), inBlock) << tensor.name << " row " << s << " dim " << d << " reads " << got[s * D + d];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvQuantAppendNonFinite, ::testing::Values(DType::I8, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtypeName(p.param)); });

}  // namespace
}  // namespace foundry::test
