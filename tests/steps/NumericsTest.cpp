// Numerics at the edges (docs/reliability.md, "Numerics"): q·k beyond the f16 range while the
// inputs are f16, NaN and Inf in the inputs, tens of thousands of keys, and Split-K partials whose
// whole split is masked. Extreme logits (|s| ~ 1e4) are in AttentionParityTest.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "foundry/Runtime.h"
#include "foundry/Workspace.h"
#include "foundry/stages/modifiers/MaskStage.h"
#include "foundry/steps/Selector.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// Knobs for one variant; the subgroup prefill variant runs on every device.
AttentionOptions knobs(std::function<void(AttentionOptions&)> set = {}) {
  AttentionOptions o;
  o.faPrefillCoopMat = Force::Off;
  if (set) set(o);
  return o;
}

struct Variant {
  std::string name;
  AttentionOptions options;
};

std::vector<Variant> decodeVariants(DType dtype) {
  std::vector<Variant> v = {
      {"auto", knobs()},
      {"scalar", knobs([](AttentionOptions& o) { o.faDecodeScalar = true; })},
      {"half_partials", knobs([](AttentionOptions& o) { o.faDecodeTgOut = PartialStorage::Half; })},
      {"split3", knobs([](AttentionOptions& o) { o.faDecodeSplitK = 3; })},
      {"split3_reduce_kernel", knobs([](AttentionOptions& o) { o.faDecodeSplitK = 3, o.faDecodeFusedReduce = Force::Off; })},
      {"scatter", knobs([](AttentionOptions& o) { o.faDecodeScatter = Force::On, o.faDecodeUnroll = 4; })},
      {"gathered", knobs([](AttentionOptions& o) { o.faDecodeScatter = Force::Off; })},
      {"eager_rescale", knobs([](AttentionOptions& o) { o.faDecodeLazyRescale = Force::Off; })}};
  if (tensorCoreDecode(runtime().info(), dtype)) {
    v.push_back({"tensor_cores", knobs([](AttentionOptions& o) { o.faDecodeTensorCores = Force::On; })});
    v.push_back({"tensor_cores_split3", knobs([](AttentionOptions& o) { o.faDecodeTensorCores = Force::On, o.faDecodeSplitK = 3; })});
  }
  return v;
}

/// int8 and q8_0 caches: the decode kernels that take q to int8 or to f16 over its largest magnitude.
std::vector<Variant> quantizedDecodeVariants(DType kv) {
  std::vector<Variant> v = {
      {"auto", knobs()},
      {"int8_dot", knobs([](AttentionOptions& o) { o.faDecodeInt8Dot = Force::On; })},
      {"widened", knobs([](AttentionOptions& o) { o.faDecodeInt8Dot = Force::Off; })},
      {"scalar", knobs([](AttentionOptions& o) { o.faDecodeScalar = true; })}};
  if (kv == DType::I8) {
    v.push_back({"half_products", knobs([](AttentionOptions& o) {
                   o.faDecodeHalfProducts = o.faDecodeStepScales = Force::On;
                   o.faDecodeKeysPerWarp = 2, o.faDecodeUnroll = 4, o.faDecodeVectorWidth = 4;
                 })});
  }
  if (tensorCoreDecode(runtime().info(), kv)) {
    v.push_back({"tensor_cores", knobs([](AttentionOptions& o) { o.faDecodeTensorCores = Force::On; })});
  }
  return v;
}

std::vector<Variant> prefillVariants(DType dtype) {
  std::vector<Variant> v = {{"auto", knobs([](AttentionOptions& o) { o.disableFaPrefillSplitK = true; })},
                            {"split3", knobs([](AttentionOptions& o) { o.faPrefillSplitK = 3; })}};
  const DeviceInfo& device = runtime().info();
  if (dtype == DType::F16 && device.hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    v.push_back({"coopmat", knobs([](AttentionOptions& o) { o.faPrefillCoopMat = Force::On, o.disableFaPrefillSplitK = true; })});
    v.push_back({"coopmat_split3", knobs([](AttentionOptions& o) { o.faPrefillCoopMat = Force::On, o.faPrefillSplitK = 3; })});
  }
  if (dtype == DType::F16 && device.coopMat2) {
    v.push_back({"coopmat2", knobs([](AttentionOptions& o) {
                   o.faPrefillCoopMat = o.faPrefillCoopMat2 = Force::On;
                   o.disableFaPrefillSplitK = true;
                 })});
  }
  return v;
}

// ---- q·k beyond 65504 with f16 inputs: the kernels multiply and accumulate in f32.

TEST(Numerics, F16ScoresBeyondTheHalfRangeStayExact) {
  for (const bool decode : {true, false}) {
    for (const auto& v : decode ? decodeVariants(DType::F16) : prefillVariants(DType::F16)) {
      // |q|, |k| up to 100 over 128 dims: |q·k| well past 65504; a scale of 2^-10 keeps the logits
      // moderate (~100), so only an f16 product or accumulator could go wrong here.
      AttentionCase c = attentionCase(1, 8, 2, decode ? 1 : 40, 300, 128, DType::F16);
      c.magnitude = 100.0f;
      c.scale = 1.0f / 1024.0f;
      SCOPED_TRACE(c.name() + " " + v.name);
      const AttentionResult r = runFlash(c, v.options);
      const double maxAbsDot = r.maxAbsLogit / c.scale;
      EXPECT_GT(maxAbsDot, 1.5 * 65504.0) << "the inputs must overflow f16 in q·k for this test to mean anything";
      EXPECT_TRUE(matchesReference(c, r));
    }
  }
}

// ---- NaN and Inf in the inputs (docs/reliability.md, "NaN and Inf in the inputs"), PyTorch's policy,
// asserted for every decode and prefill kernel the device runs:
//  - an output row the bad value cannot reach (another head's KV group, a query that does not see the
//    key row, a row past kv_len, a key a mask hides) is bit for bit what it is without it;
//  - a NaN or infinity in q, or in a key row (a NaN or +Inf score), or a NaN in an additive mask makes
//    every element of each row that sees it NaN;
//  - a NaN (infinity) in element d of a visible value row makes element d of the output NaN
//    (non-finite) and leaves the row's other elements as they were; in an int8 or q8_0 cache the value
//    gives its block a NaN scale, so the block's 32 dimensions are NaN.
// A NaN in a value row a query does not see still reaches its element d on a prefill tile that crosses
// the diagonal (0 x NaN in the P.V product, as in FlashAttention): those rows are `Leaks`, not asserted.

enum class Expect { Unreached, Reached, Leaks };

struct PoisonCase {
  std::string name;
  AttentionCase shape;
  InputPoke poke;
  /// Whether the bad value can reach output row (b, h, i).
  std::function<Expect(std::uint32_t b, std::uint32_t h, std::uint32_t i)> expect;
  /// Puts the bad value somewhere other than the inputs (then `poke` only names the rule: a score's).
  std::function<void(AttentionCase&)> poison = {};
};

void checkPoisoned(const PoisonCase& pc, const Variant& v) {
  SCOPED_TRACE(pc.name + " " + pc.shape.name() + " " + v.name);
  const AttentionResult clean = runFlash(pc.shape, v.options);
  ASSERT_TRUE(matchesReference(pc.shape, clean));
  AttentionCase poked = pc.shape;
  if (pc.poison) {
    pc.poison(poked);
  } else {
    poked.pokes = {pc.poke};
  }
  const AttentionResult r = runFlash(poked, v.options);
  const AttentionProblem p = pc.shape.problem();
  int reached = 0, reachable = 0;
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    for (std::uint32_t h = 0; h < p.nHeads; ++h) {
      for (std::uint32_t i = 0; i < p.qLen; ++i) {
        const std::size_t row = qIndex(p, pc.shape.oLayout, b, h, i);
        const Expect e = pc.expect(b, h, i);
        reachable += e != Expect::Unreached;
        const auto where = [&](std::uint32_t d) {
          return fmt::format("output (b{}, h{}, i{}, d{}) = {} (clean run: {})", b, h, i, d, r.got[row + d],
                             clean.got[row + d]);
        };
        if (e == Expect::Unreached) {
          for (std::uint32_t d = 0; d < p.headDim; ++d) {
            ASSERT_EQ(std::memcmp(&r.got[row + d], &clean.got[row + d], sizeof(float)), 0)
                << where(d) << " should be unaffected";
          }
        } else if (e == Expect::Reached) {
          ++reached;
          if (pc.poke.operand == Operand::V) {
            // A value element reaches only element d: non-finite there (NaN for NaN), the rest as clean.
            // In an int8 or q8_0 cache it gives its block a NaN scale: the block's 32 dims are NaN.
            const bool block = quantized(pc.shape.dtype);
            const std::uint32_t lo = block ? *pc.poke.dim / 32 * 32 : *pc.poke.dim;
            const std::uint32_t hi = block ? std::min(lo + 32, p.headDim) : lo + 1;
            for (std::uint32_t d = 0; d < p.headDim; ++d) {
              const float got = r.got[row + d];
              if (d < lo || d >= hi) {
                ASSERT_EQ(std::memcmp(&got, &clean.got[row + d], sizeof(float)), 0) << where(d) << " should be unaffected";
              } else if (std::isnan(pc.poke.value) || block) {
                ASSERT_TRUE(std::isnan(got)) << where(d) << " should be NaN";
              } else {
                ASSERT_FALSE(std::isfinite(got)) << where(d) << " should be non-finite";
              }
            }
          } else {
            // A non-finite score (from q or k) makes the row's softmax NaN: every element of the row.
            for (std::uint32_t d = 0; d < p.headDim; ++d) ASSERT_TRUE(std::isnan(r.got[row + d])) << where(d) << " should be NaN";
          }
        }
      }
    }
  }
  if (reachable) {
    EXPECT_GT(reached, 0) << "the poke must reach some output, else this case proves nothing";
  }
}

// Prefill: 16 new queries at positions 24..39 of 40 keys; KV head 1 serves query heads 2 and 3.
constexpr std::uint32_t kQ = 16, kKv = 40, kOffset = kKv - kQ;
AttentionCase prefillShape(DType dtype) {
  return attentionCase(1, 4, 2, kQ, kKv, 64, dtype);
}
AttentionCase decodeShape(DType dtype) {
  return attentionCase(1, 4, 2, 1, 300, 64, dtype);
}

// Query i sees key j when j <= kOffset + i.
bool sees(std::uint32_t i, std::uint32_t j) {
  return j <= kOffset + i;
}
bool inGroup1(std::uint32_t h) {
  return h / 2 == 1;
}

/// For a key or query poke: the rows that see it are reached, every other row is not.
Expect keyRule(bool reached) {
  return reached ? Expect::Reached : Expect::Unreached;
}
/// For a value poke: rows of other KV groups are unreached; masked queries of the same group are
/// where today's prefill kernels leak (0 * NaN on tiles that cross the diagonal).
Expect valueRule(bool sameGroup, bool seen) {
  return !sameGroup ? Expect::Unreached : (seen ? Expect::Reached : Expect::Leaks);
}

std::vector<PoisonCase> poisonCases(DType dtype) {
  const std::uint32_t j = kOffset + 5;  // seen by queries 5..15, masked for 0..4
  return {
      {"NaNInQueryRow",
       prefillShape(dtype),
       {Operand::Q, 0, 2, 3, 17, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t i) { return keyRule(h == 2 && i == 3); }},
      {"InfInQueryRow",
       prefillShape(dtype),
       {Operand::Q, 0, 1, 9, std::nullopt, kInf},
       [](std::uint32_t, std::uint32_t h, std::uint32_t i) { return keyRule(h == 1 && i == 9); }},
      {"NaNInKeyRow",
       prefillShape(dtype),
       {Operand::K, 0, 1, j, 9, kNaN},
       [j](std::uint32_t, std::uint32_t h, std::uint32_t i) { return keyRule(inGroup1(h) && sees(i, j)); }},
      {"InfInKeyRow",
       prefillShape(dtype),
       {Operand::K, 0, 1, j, std::nullopt, kInf},
       [j](std::uint32_t, std::uint32_t h, std::uint32_t i) { return keyRule(inGroup1(h) && sees(i, j)); }},
      {"NaNInFirstKeyRow",
       prefillShape(dtype),
       {Operand::K, 0, 0, 0, std::nullopt, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(!inGroup1(h)); }},
      {"NaNInLastKeyRow",
       prefillShape(dtype),
       {Operand::K, 0, 0, kKv - 1, 0, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t i) { return keyRule(!inGroup1(h) && i == kQ - 1); }},
      {"NaNInValueElement",
       prefillShape(dtype),
       {Operand::V, 0, 1, j, 7, kNaN},
       [j](std::uint32_t, std::uint32_t h, std::uint32_t i) { return valueRule(inGroup1(h), sees(i, j)); }},
      {"InfInValueElement",
       prefillShape(dtype),
       {Operand::V, 0, 1, j, 7, kInf},
       [j](std::uint32_t, std::uint32_t h, std::uint32_t i) { return valueRule(inGroup1(h), sees(i, j)); }},
  };
}

std::vector<PoisonCase> decodePoisonCases(DType dtype) {
  return {
      {"DecodeNaNInKeyRow",
       decodeShape(dtype),
       {Operand::K, 0, 1, 123, 3, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(inGroup1(h)); }},
      {"DecodeNaNInValueElement",
       decodeShape(dtype),
       {Operand::V, 0, 0, 299, 63, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return valueRule(!inGroup1(h), true); }},
      {"DecodeNaNInQuery",
       decodeShape(dtype),
       {Operand::Q, 0, 3, 0, 0, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(h == 3); }},
      {"DecodeInfInQuery",
       decodeShape(dtype),
       {Operand::Q, 0, 1, 0, std::nullopt, kInf},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(h == 1); }},
  };
}

// int8 and q8_0 caches, quantized on upload (KvQuant: an infinity gives its block a NaN scale), f16 q
// and o. A NaN in q reaches the kernels that quantize q; an infinity in K or V reaches every score or
// value element its block holds.
std::vector<PoisonCase> quantizedDecodeCases(DType kv) {
  AttentionCase shape = decodeShape(kv);
  shape.qType = shape.oType = DType::F16;
  return {
      {"NaNInQuery", shape, {Operand::Q, 0, 3, 0, 5, kNaN},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(h == 3); }},
      {"InfInQuery", shape, {Operand::Q, 0, 0, 0, 60, kInf},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(h == 0); }},
      {"InfInKeyElement", shape, {Operand::K, 0, 1, 123, 3, kInf},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return keyRule(inGroup1(h)); }},
      {"InfInValueElement", shape, {Operand::V, 0, 0, 299, 40, kInf},
       [](std::uint32_t, std::uint32_t h, std::uint32_t) { return valueRule(!inGroup1(h), true); }},
  };
}

class NonFiniteInputs : public ::testing::TestWithParam<DType> {};

TEST_P(NonFiniteInputs, PrefillOnlyReachesTheRowsThatSeeThem) {
  for (const auto& pc : poisonCases(GetParam())) {
    for (const auto& v : prefillVariants(GetParam())) checkPoisoned(pc, v);
  }
}

TEST_P(NonFiniteInputs, DecodeOnlyReachesTheRowsThatSeeThem) {
  for (const auto& pc : decodePoisonCases(GetParam())) {
    for (const auto& v : decodeVariants(GetParam())) checkPoisoned(pc, v);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, NonFiniteInputs, ::testing::Values(DType::F16, DType::BF16, DType::F32),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtypeName(p.param)); });

// An additive mask [1, 1, q_len, kv_len] of zeros (the clean run) with a NaN at (query `row`, key `key`):
// PyTorch adds it to the score, which makes that query's row NaN in every head.
ModifierSpec maskWithNaN(std::uint32_t row, std::uint32_t key, bool poisoned) {
  return custom(poisoned ? "mask_nan" : "mask_zero", [=](Runtime& rt, const AttentionProblem& p) -> ModifierPtr {
    std::vector<float> host(std::size_t(p.qLen) * p.kvLen, 0.0f);
    if (poisoned) host.at(std::size_t(row) * p.kvLen + key) = kNaN;
    const Tensor t = rt.allocate("nan_mask", DType::F32, {1, 1, p.qLen, p.kvLen});
    rt.upload(t, host);
    return MaskStage::additive(t, host);
  });
}

std::vector<PoisonCase> maskCases(DType dtype) {
  const std::uint32_t j = kOffset + 5;  // seen by queries 5..15
  AttentionCase prefill = prefillShape(dtype), decode = decodeShape(dtype);
  prefill.modifiers = {maskWithNaN(7, j, false)};
  decode.modifiers = {maskWithNaN(0, 150, false)};
  return {{"NaNInMask", prefill, {Operand::Q}, [](std::uint32_t, std::uint32_t, std::uint32_t i) { return keyRule(i == 7); },
           [j](AttentionCase& c) { c.modifiers = {maskWithNaN(7, j, true)}; }},
          {"NaNInMaskOfAHiddenKey", prefill, {Operand::Q}, [](std::uint32_t, std::uint32_t, std::uint32_t) { return Expect::Unreached; },
           [j](AttentionCase& c) { c.modifiers = {maskWithNaN(2, j, true)}; }},
          {"DecodeNaNInMask", decode, {Operand::Q}, [](std::uint32_t, std::uint32_t, std::uint32_t) { return keyRule(true); },
           [](AttentionCase& c) { c.modifiers = {maskWithNaN(0, 150, true)}; }}};
}

TEST_P(NonFiniteInputs, AMaskReachesTheRowsThatSeeItsKey) {
  for (const auto& pc : maskCases(GetParam())) {
    const bool decode = pc.shape.qLen == 1;
    for (const auto& v : decode ? decodeVariants(GetParam()) : prefillVariants(GetParam())) checkPoisoned(pc, v);
  }
}

class NonFiniteQuantizedInputs : public ::testing::TestWithParam<DType> {};

TEST_P(NonFiniteQuantizedInputs, DecodeOnlyReachesTheRowsThatSeeThem) {
  for (const auto& pc : quantizedDecodeCases(GetParam())) {
    for (const auto& v : quantizedDecodeVariants(GetParam())) checkPoisoned(pc, v);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, NonFiniteQuantizedInputs, ::testing::Values(DType::I8, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtypeName(p.param)); });

// ---- Long KV: tens of thousands of keys stay within the stated error bound.
//
// Lavapipe (llvmpipe) ends every loop of a shader invocation once all its loops together have made
// 65535 passes (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), silently. The Selector splits the keys so that
// no workgroup's range reaches that (Selector::mostKeysPerWorkgroup; docs/reliability.md): the prefill
// cases here ran unsplit before it did, and lost their last keys.

TEST(Numerics, LongKvStaysWithinTheBound) {
  AttentionCase sharp = attentionCase(1, 4, 1, 1, 30000, 64, DType::F32);
  sharp.magnitude = 3.0f;  // logits up to ~30: a few keys dominate, the rest still count
  const std::vector<AttentionCase> cases = {
      // 32768 keys x 4 KV heads x 128 dims of f16: 32 MiB per cache.
      attentionCase(1, 4, 4, 1, 32768, 128, DType::F16),
      attentionCase(1, 8, 2, 1, 30000, 64, DType::F32),
      sharp,
      attentionCase(1, 4, 1, 16, 30000, 64, DType::F16),
      attentionCase(1, 4, 1, 16, 30000, 64, DType::F32),
      attentionCase(1, 2, 1, 8, 20000, 128, DType::F32),
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name());
    const AttentionResult r = runFlash(c, knobs());
    EXPECT_TRUE(matchesReference(c, r));
  }
}

// ---- The loop limit's edge: each kernel at the most keys the Selector lets one workgroup take on this
// device, forced into one workgroup, and at three times that and more with the Selector's own splits.

struct LoopLimitCase {
  std::string name;
  AttentionCase shape;
  std::map<std::string, std::string> knobs;
};

AttentionOptions withKnobs(std::map<std::string, std::string> env) {
  env.emplace("FOUNDRY_FA_PREFILL_COOPMAT", "0");
  return AttentionOptions::fromEnvironment(env);
}

TEST(Numerics, RangesUpToTheLoopLimitStayWhole) {
  const DeviceInfo& device = runtime().info();
  if (device.loopLimit == 0) GTEST_SKIP() << "device '" << device.name << "' has no loop limit";
  const auto quantized = [](AttentionCase c) {
    c.qType = c.oType = DType::F16;
    return c;
  };
  const auto paged = [](AttentionCase c) {
    c.pageSize = 64;
    return c;
  };
  const auto modified = [](AttentionCase c) {
    c.modifiers = {alibi(), softCap(30.0)};
    return c;
  };
  const auto masked = [](AttentionCase c) {
    c.modifiers = {additiveMask()};
    return c;
  };
  const std::vector<LoopLimitCase> cases = {
      {"decode_f32_d64", attentionCase(1, 4, 1, 1, 0, 64, DType::F32), {}},
      {"decode_f16_d128_gqa", attentionCase(1, 8, 2, 1, 0, 128, DType::F16), {}},
      {"decode_scalar_f32_d128", attentionCase(1, 4, 1, 1, 0, 128, DType::F32), {{"FOUNDRY_FA_DECODE_SCALAR", "1"}}},
      {"decode_int8_d128", quantized(attentionCase(1, 4, 1, 1, 0, 128, DType::I8)), {}},
      {"decode_paged_f16_d64", paged(attentionCase(1, 4, 1, 1, 0, 64, DType::F16)), {}},
      {"decode_scatter_f32_d64",
       attentionCase(1, 4, 1, 1, 0, 64, DType::F32),
       {{"FOUNDRY_FA_DECODE_SCATTER", "1"}, {"FOUNDRY_FA_DECODE_UNROLL", "2"}}},
      {"decode_alibi_softcap_f16_d64", modified(attentionCase(1, 4, 1, 1, 0, 64, DType::F16)), {}},
      {"prefill_causal_f32_d64", attentionCase(1, 2, 1, 16, 0, 64, DType::F32), {}},
      {"prefill_causal_f16_d128", attentionCase(1, 2, 1, 16, 0, 128, DType::F16), {}},
      {"prefill_alibi_softcap_bf16_d64", modified(attentionCase(1, 2, 1, 16, 0, 64, DType::BF16)), {}},
      {"prefill_f32_d256", attentionCase(1, 1, 1, 8, 0, 256, DType::F32), {}},
      {"prefill_mask_f16_d64", masked(attentionCase(1, 2, 1, 16, 0, 64, DType::F16)), {}},
  };
  for (const auto& lc : cases) {
    SCOPED_TRACE(lc.name);
    const bool decode = lc.shape.qLen == 1;
    AttentionCase c = lc.shape;
    c.kvLen = 4096;
    AttentionPlan variant = Selector::variant(c.problem(), device, withKnobs(lc.knobs));
    const std::uint32_t most = Selector::mostKeysPerWorkgroup(variant, device);
    ASSERT_GT(most, 0u);
    // One workgroup over all `most` keys.
    c.kvLen = most;
    auto one = lc.knobs;
    one[decode ? "FOUNDRY_FA_DECODE_SPLIT_K" : "FOUNDRY_FA_PREFILL_SPLIT_K"] = "1";
    AttentionPlan plan = Selector::plan(c.problem(), device, withKnobs(one));
    ASSERT_EQ(plan.splits, 1u) << plan.describe();
    ASSERT_EQ(Selector::mostKeysPerWorkgroup(plan, device), most) << plan.describe();
    AttentionResult r = runFlash(c, withKnobs(one));
    EXPECT_TRUE(matchesReference(c, r)) << c.name() << " in one workgroup";
    // Three times that and more: the Selector splits (4 or more), each split within the limit.
    c.kvLen = 3 * most + 17;
    plan = Selector::plan(c.problem(), device, withKnobs(lc.knobs));
    EXPECT_GE(plan.splits, 4u) << plan.describe();
    EXPECT_LE(plan.kvChunk, Selector::mostKeysPerWorkgroup(plan, device)) << plan.describe();
    r = runFlash(c, withKnobs(lc.knobs));
    EXPECT_TRUE(matchesReference(c, r)) << c.name() << " split " << plan.splits << " ways";
  }
}

// ---- Fully masked rows give zeros. With the causal offset kv_len - q_len every query sees at least
// one key, so a whole output row is never masked; a Split-K partial is, when its split starts past
// the query's position. Such a partial must hold O = 0, l = 0 and the finite running-max floor, so
// that the reduce weighs it by exactly nothing.

/// A workspace that remembers the scratch it handed out.
class KeepingWorkspace : public Workspace {
 public:
  explicit KeepingWorkspace(Runtime& rt) : inner_(rt) {}
  Tensor scratch(const std::string& name, DType dtype, std::vector<std::int64_t> dims) override {
    return held[name] = inner_.scratch(name, dtype, std::move(dims));
  }
  Tensor zeroed(const std::string& name, DType dtype, std::vector<std::int64_t> dims) override {
    return held[name] = inner_.zeroed(name, dtype, std::move(dims));
  }
  std::uint64_t bytes() const override { return inner_.bytes(); }
  std::map<std::string, Tensor> held;

 private:
  DeviceWorkspace inner_;
};

TEST(Numerics, FullyMaskedSplitKPartialsAreZero) {
  Runtime& rt = runtime();
  for (const DType dtype : {DType::F16, DType::F32}) {
    // q_len = kv_len = 256 split 8 ways: query i sees keys 0..i, so most (query, split) pairs are masked.
    const AttentionCase c = attentionCase(1, 2, 1, 256, 256, 64, dtype);
    SCOPED_TRACE(c.name());
    const AttentionProblem p = c.problem();
    const AttentionOptions options = knobs([](AttentionOptions& o) { o.faPrefillSplitK = 8; });
    AttentionCall call;
    call.q = rt.allocate("q", dtype, p.qDims(Layout::HeadMajor), Layout::HeadMajor);
    call.o = rt.allocate("o", dtype, p.qDims(Layout::HeadMajor), Layout::HeadMajor);
    call.k = rt.allocate("k_cache", dtype, p.kvDims(), Layout::KvCache);
    call.v = rt.allocate("v_cache", dtype, p.kvDims(), Layout::KvCache);
    call.kvLen = p.kvLen;
    rt.upload(call.q, randomVector(call.q.numel(), 1));
    rt.upload(call.k, randomVector(call.k.numel(), 2));
    rt.upload(call.v, randomVector(call.v.numel(), 3));
    rt.poison(call.o);
    FlashAttentionStep step(rt.info(), rt.snippets(), options);
    auto dispatcher = rt.dispatcher();
    KeepingWorkspace workspace(rt);
    // Poison the partials first: a split the part kernel skipped would show as NaN.
    StepContext ctx{*dispatcher, workspace, &rt};
    const StepRecord record = step.run(ctx, call);
    ASSERT_GT(record.plan.splits, 1u) << record.plan.describe();
    rt.poison(workspace.held.at("splitk_partial_o"));
    rt.poison(workspace.held.at("splitk_partial_ml"));
    dispatcher->submit();
    const auto partialO = rt.download(workspace.held.at("splitk_partial_o"));
    const auto partialMl = rt.download(workspace.held.at("splitk_partial_ml"));
    const auto out = rt.download(call.o);
    const std::uint32_t splits = record.plan.splits, chunk = record.plan.kvChunk;
    int masked = 0;
    for (std::uint32_t h = 0; h < p.nHeads; ++h) {
      for (std::uint32_t i = 0; i < p.qLen; ++i) {
        for (std::uint32_t s = 0; s < splits; ++s) {
          const std::size_t row = (std::size_t(h) * p.qLen + i) * splits + s;
          const float m = partialMl[row * 2], l = partialMl[row * 2 + 1];
          ASSERT_TRUE(std::isfinite(m) && std::isfinite(l)) << "h" << h << " i" << i << " split " << s;
          if (s * chunk <= p.queryOffset() + i) continue;  // the split holds a visible key
          ++masked;
          ASSERT_EQ(l, 0.0f) << "masked split " << s << " of query " << i;
          ASSERT_LT(m, -1e29f) << "masked split " << s << " of query " << i;
          for (std::uint32_t d = 0; d < p.headDim; ++d) {
            ASSERT_EQ(partialO[row * p.headDim + d], 0.0f) << "masked split " << s << " of query " << i << ", d" << d;
          }
        }
      }
    }
    EXPECT_GT(masked, 500);
    for (const float x : out) ASSERT_TRUE(std::isfinite(x));
  }
}

}  // namespace
}  // namespace foundry::test
