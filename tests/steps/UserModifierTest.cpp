// Modifiers the library does not ship, written here as a user would: a Stage deriving from
// AttentionModifier that brings its own GLSL (KernelInterface::snippetText), its tensors and push
// constants, and a float64 implementation of each hook for the CPU reference. A prefix-LM mask (every
// query sees a bidirectional prefix, then causal) and a per-head temperature (each head's logits
// divided by its own value), composed with the built-ins, built, run and checked on the device.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "foundry/Runtime.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/modifiers/PerHeadValues.h"
#include "foundry/steps/Selector.h"
#include "support/AttentionHarness.h"
#include "support/TestRuntime.h"

namespace foundry::test {
namespace {

/// Query position q sees keys k < prefix (the prompt, bidirectionally) and keys k <= q.
class PrefixLmStage : public AttentionModifier {
 public:
  explicit PrefixLmStage(std::uint32_t prefix) : prefix_(prefix) {}
  std::string name() const override { return "PrefixLmStage"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.push("prefix_len", PushType::U32);
    k.snippetText("prefix_lm", R"(// A prefix-LM mask: a bidirectional prefix, causal after it.
bool prefix_lm_visible(uint b, uint h, uint q, uint k) { return k < pc.prefix_len || k <= q; }
uvec4 prefix_lm_key_range(uint b, uint h, uint q_lo, uint q_hi) {
  return uvec4(0u, max(pc.prefix_len, q_hi + 1u), 0u, max(pc.prefix_len, q_lo + 1u));
}
)");
    k.hook(hook::kVisible, "prefix_lm_visible").hook(hook::kKeyRange, "prefix_lm_key_range");
  }
  void bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const override {
    args.set("prefix_len", prefix_);
  }
  bool visible(const HookAt& at) const override { return at.k < prefix_ || at.k <= at.q; }
  KeyRange keyRange(const HookBlock& x) const override {
    return {0, std::max(prefix_, x.qHi + 1), 0, std::max(prefix_, x.qLo + 1)};
  }

 private:
  std::uint32_t prefix_;
};

/// Head h's logits divided by temperature[h].
class HeadTemperatureStage : public AttentionModifier {
 public:
  explicit HeadTemperatureStage(PerHeadValues t) : t_(std::move(t)) {}
  std::string name() const override { return "HeadTemperatureStage"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.buffer("head_temperature", DType::F32, Access::ReadOnly);
    k.snippetText("head_temperature", "float head_temperature_score(float s, uint b, uint h, uint q, uint k) {\n"
                                      "  return s / head_temperature[h];\n}\n");
    k.hook(hook::kScore, "head_temperature_score");
  }
  void validate(const ModifierCall& call) const override { t_.check(call, "head_temperature"); }
  void bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const override {
    args.bind("head_temperature", t_.tensor);
  }
  double score(double s, const HookAt& at) const override { return s / t_.at(at.h); }

 private:
  PerHeadValues t_;
};

ModifierSpec prefixLm(std::uint32_t prefix) {
  return custom(fmt::format("prefixlm{}", prefix),
                [prefix](Runtime&, const AttentionProblem&) { return std::make_shared<PrefixLmStage>(prefix); });
}

ModifierSpec temperature() {
  return custom("temperature", [](Runtime& rt, const AttentionProblem& p) {
    PerHeadValues t;
    for (std::uint32_t h = 0; h < p.nHeads; ++h) t.values.push_back(0.25 + 0.5 * h);
    t.tensor = rt.allocate("head_temperature", DType::F32, {p.nHeads});
    rt.upload(t.tensor, std::vector<float>(t.values.begin(), t.values.end()));
    return std::make_shared<HeadTemperatureStage>(t);
  });
}

/// Documents packed into one sequence: a query sees only the keys of its own document, found by a
/// loop over the documents' first positions (a buffer): a hook whose loops depend on the call. Its
/// loop passes a call are declared (AttentionModifier::loopPassesPerCall), so that on a device that
/// ends an invocation's loops after so many passes (llvmpipe) the Selector splits the keys to match.
class DocumentMaskStage : public AttentionModifier {
 public:
  DocumentMaskStage(Tensor starts, std::vector<std::uint32_t> host)
      : starts_(std::move(starts)), host_(std::move(host)) {}
  std::string name() const override { return "DocumentMaskStage"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.buffer("doc_starts", DType::F32, Access::ReadOnly).push("doc_count", PushType::U32);
    k.snippetText("doc_mask", R"(// How many documents after the first start at or before position x.
uint doc_mask_doc(uint x) {
  uint d = 0u;
  for (uint i = 1u; i < pc.doc_count; ++i) d += x >= uint(doc_starts[i]) ? 1u : 0u;
  return d;
}
bool doc_mask_visible(uint b, uint h, uint q, uint k) { return doc_mask_doc(k) == doc_mask_doc(q); }
// Every key may be visible and none surely is: the kernels test each key (as the host keyRange says).
uvec4 doc_mask_key_range(uint b, uint h, uint q_lo, uint q_hi) { return uvec4(0u, 0xffffffffu, 0u, 0u); }
)");
    k.hook(hook::kVisible, "doc_mask_visible").hook(hook::kKeyRange, "doc_mask_key_range");
  }
  void bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const override {
    args.bind("doc_starts", starts_).set("doc_count", static_cast<std::uint32_t>(host_.size()));
  }
  // Two runs of the loop (the query's document and the key's), each of doc_count - 1 trips.
  std::uint32_t loopPassesPerCall(const ModifierCall&) const override {
    return 2 * static_cast<std::uint32_t>(host_.size() + 1);
  }
  bool visible(const HookAt& at) const override { return doc(at.k) == doc(at.q); }

 private:
  std::uint32_t doc(std::uint32_t x) const {
    std::uint32_t d = 0;
    for (std::size_t i = 1; i < host_.size(); ++i) d += x >= host_[i] ? 1 : 0;
    return d;
  }
  Tensor starts_;
  std::vector<std::uint32_t> host_;
};

// Documents of `length` keys from position 0 to the call's last key.
ModifierSpec documents(std::uint32_t length) {
  return custom(fmt::format("docs{}", length), [length](Runtime& rt, const AttentionProblem& p) {
    std::vector<std::uint32_t> starts;
    for (std::uint32_t x = 0; x < p.kvLen; x += length) starts.push_back(x);
    const Tensor t = rt.allocate("doc_starts", DType::F32, {static_cast<std::int64_t>(starts.size())});
    rt.upload(t, std::vector<float>(starts.begin(), starts.end()));
    return std::make_shared<DocumentMaskStage>(t, starts);
  });
}

AttentionOptions subgroupPrefill() { return AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}); }

TEST(UserModifier, PrefixLmPrefillMatchesTheReference) {
  AttentionCase c = attentionCase(1, 4, 2, 40, 40, 64, DType::F16, Layout::HeadMajor, Layout::HeadMajor, false);
  c.modifiers = {prefixLm(12)};
  const AttentionResult r = runFlash(c, subgroupPrefill());
  EXPECT_TRUE(matchesReference(c, r));
  ASSERT_EQ(r.record.modifiers.size(), 1u);
  EXPECT_NE(r.record.kernels[0].find("PrefixLm"), std::string::npos) << r.record.kernels[0];
}

TEST(UserModifier, PrefixLmWithSplitKAndATemperatureComposedWithASoftCap) {
  // 300 keys: two splits even of 64-key tiles.
  AttentionCase c = attentionCase(1, 4, 4, 30, 300, 64, DType::F32, Layout::HeadMajor, Layout::HeadMajor, false);
  c.modifiers = {prefixLm(7), temperature(), softCap(5.0)};
  const AttentionResult r =
      runFlash(c, AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}, {"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}));
  EXPECT_GT(r.record.plan.splits, 1u);
  EXPECT_TRUE(matchesReference(c, r));
}

TEST(UserModifier, TemperatureInDecodeAndOnTheReferencePath) {
  AttentionCase c = attentionCase(2, 8, 2, 1, 90, 64, DType::F16);
  c.modifiers = {temperature(), window(30)};
  EXPECT_TRUE(matchesReference(c, runFlash(c, subgroupPrefill())));
  EXPECT_TRUE(matchesReference(c, runReference(c)));
}

// Without the declaration, each key's two loops over 30 documents put every decode invocation past
// llvmpipe's loop limit at 3000 keys, and the device dropped the last document's keys silently (the
// decode and the prefill mismatched the reference here before loopPassesPerCall counted them).
TEST(UserModifier, ADocumentMaskWithALoopDeclaresItsPassesAndStaysWithinTheLoopLimit) {
  for (const std::uint32_t qLen : {1u, 40u}) {
    AttentionCase c = attentionCase(1, 4, 1, qLen, 3000, 64, DType::F32);
    c.modifiers = {documents(100)};
    const AttentionResult r = runFlash(c, subgroupPrefill());
    EXPECT_TRUE(matchesReference(c, r)) << r.record.plan.describe();
    const DeviceInfo& device = runtime().info();
    if (device.loopLimit != 0) {
      // 62 passes a call (two runs of 30 trips), 3 calls a key for each row an invocation scores it for.
      const AttentionPlan& plan = r.record.plan;
      const std::uint64_t hooks = 62u * 3u * (plan.decode ? plan.decodeVariant.heads : plan.prefillVariant.rowsPerWarp);
      EXPECT_LE(plan.kvChunk, Selector::mostKeysPerWorkgroup(plan, device, hooks)) << plan.describe();
      EXPECT_LT(Selector::mostKeysPerWorkgroup(plan, device, hooks), Selector::mostKeysPerWorkgroup(plan, device));
    }
  }
}

TEST(UserModifier, AModifierThatChangesNothingMatchesNoModifierAtAll) {
  // A prefix as long as the cache: the mask hides nothing, so the output is plain attention's.
  AttentionCase c = attentionCase(1, 2, 1, 20, 20, 64, DType::F32, Layout::HeadMajor, Layout::HeadMajor, false);
  const AttentionResult plain = runFlash(c, subgroupPrefill());
  c.modifiers = {prefixLm(20)};
  const AttentionResult masked = runFlash(c, subgroupPrefill());
  EXPECT_LT(compareDeviceResults(masked, plain).maxRel, 1e-6);
}

}  // namespace
}  // namespace foundry::test
