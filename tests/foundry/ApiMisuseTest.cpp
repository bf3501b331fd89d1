// What the library does when an embedding program misuses its C++ API (a hostile trial's findings):
// each misuse is a UserError naming the parameter, never a crash, a hang, a write past a sequence's
// pages or a silently wrong output; and the valid calls that were refused now run and are right.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/Error.h"
#include "foundry/Runtime.h"
#include "foundry/Workspace.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FusedAttention.h"
#include "foundry/steps/OutputComparison.h"
#include "foundry/steps/PagedKv.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/testing/StepMockTest.h"
#include "support/TempDir.h"
#include "support/TestRuntime.h"
#include "support/UserErrorText.h"

namespace foundry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using test::userError;

/// A decode call of 4 query heads over 2 KV heads, D 64, f32, 20 of 32 keys, on random values.
struct SmallDecode {
  Runtime& rt = test::runtime();
  AttentionCall call;
  SmallDecode() {
    call.q = rt.allocate("q", DType::F32, {1, 4, 1, 64}, Layout::HeadMajor);
    call.o = rt.allocate("o", DType::F32, {1, 4, 1, 64}, Layout::HeadMajor);
    call.k = rt.allocate("k", DType::F32, {1, 2, 32, 64}, Layout::KvCache);
    call.v = rt.allocate("v", DType::F32, {1, 2, 32, 64}, Layout::KvCache);
    rt.upload(call.q, test::randomVector(256, 1));
    rt.upload(call.k, test::randomVector(4096, 2));
    rt.upload(call.v, test::randomVector(4096, 3));
    call.kvLen = 20;
  }
  /// The output's largest relative error against the CPU float64 reference.
  double error() {
    AttentionProblem p;
    p.nHeads = 4;
    p.nKvHeads = 2;
    p.kvLen = 20;
    p.kvCapacity = 32;
    p.headDim = 64;
    p.dtype = DType::F32;
    p.modifiers = call.modifiers;
    const auto want = cpuAttention(p, rt.download(call.q), rt.download(call.k), rt.download(call.v));
    return compareOutputs(rt.download(call.o), want).maxRel;
  }
};

/// A score modifier whose GLSL is a value chosen at run time and whose key() says nothing of it.
struct ScaledScores : AttentionModifier {
  GlslSource glsl;
  std::string function;
  double factor;
  ScaledScores(std::string fn, double f)
      : glsl(GlslSource::fromText(fn, fmt::format("float {}(float s, uint b, uint h, uint q, uint k) {{ return {:.1f} * s; "
                                                  "}}\n", fn, f))),
        function(fn),
        factor(f) {}
  std::string name() const override { return "ScaledScores"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override { k.snippet(glsl).hook(hook::kScore, function); }
  double score(double s, const HookAt&) const override { return s * factor; }
};

TEST(ApiMisuse, ModifiersThatDifferOnlyInTheirGlslNeverShareAKernel) {
  SmallDecode d;
  FusedAttention fa(d.rt);
  for (const auto& [fn, factor] : {std::pair{"times1", 1.0}, {"times4", 4.0}}) {
    d.call.modifiers = {std::make_shared<ScaledScores>(fn, factor)};
    d.rt.poison(d.call.o);
    fa.run(d.call);
    EXPECT_LT(d.error(), 1e-4) << fn;
  }
}

/// One GLSL text for every factor: the factor is a macro the modifier defines, or a constant it declares;
/// key() says nothing of it.
struct DefinedScale : AttentionModifier {
  GlslSource glsl = GlslSource::fromText("defined_scale", "float defined_scale(float s, uint b, uint h, uint q, uint k) "
                                                          "{ return SCALE_BY * s; }\n");
  double factor;
  bool asConstant;
  DefinedScale(double f, bool constant) : factor(f), asConstant(constant) {}
  std::string name() const override { return "DefinedScale"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    if (asConstant) {
      k.constant("SCALE_BY", "float", fmt::format("{:.1f}", factor));
    } else {
      k.define("SCALE_BY", fmt::format("{:.1f}", factor));
    }
    k.snippet(glsl).hook(hook::kScore, "defined_scale");
  }
  double score(double s, const HookAt&) const override { return s * factor; }
};

// A trial found the second of two such modifiers running the first one's kernel (maxRel 0.55).
TEST(ApiMisuse, ModifiersThatDifferOnlyInADefineOrAConstantNeverShareAKernel) {
  SmallDecode d;
  for (const bool constant : {false, true}) {
    FusedAttention fa(d.rt);
    for (const double factor : {2.0, 0.5}) {
      d.call.modifiers = {std::make_shared<DefinedScale>(factor, constant)};
      d.rt.poison(d.call.o);
      fa.run(d.call);
      EXPECT_LT(d.error(), 1e-4) << (constant ? "constant " : "define ") << factor;
    }
  }
}

// Compile errors in a modifier's own file name that file when the modifier runs inside an attention
// kernel (they named the snippet's generated name there).
TEST(ApiMisuse, ACompileErrorInAModifiersFileNamesTheFile) {
  SmallDecode d;
  const test::TempDir dir;
  const auto path = dir.path() / "broken_score.glsl";
  std::ofstream(path) << "float broken_score(float s, uint b, uint h, uint q, uint k) {\n  return s * not_declared;\n}\n";
  struct Broken : AttentionModifier {
    GlslSource glsl;
    explicit Broken(const std::filesystem::path& p) : glsl(GlslSource::fromFile(p)) {}
    std::string name() const override { return "Broken"; }
    std::string key() const override { return {}; }
    void declare(KernelInterface& k, const DeviceInfo&) const override { k.snippet(glsl).hook(hook::kScore, "broken_score"); }
    double score(double s, const HookAt&) const override { return s; }
  };
  d.call.modifiers = {std::make_shared<Broken>(path)};
  FusedAttention fa(d.rt);
  try {
    fa.run(d.call);
    ADD_FAILURE() << "a modifier that does not compile ran";
  } catch (const UserError& e) {  // the user's code: a UserError naming the file
    EXPECT_EQ(e.field(), path.string());
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ":2:")) << e.what();
  }
}

// A trial found a modifier that declared and set kv_len replacing the step's value (maxRel 3.7).
TEST(ApiMisuse, AModifierThatSetsTheKernelsOwnPushConstantIsRefused) {
  SmallDecode d;
  struct OwnLength : AttentionModifier {
    GlslSource glsl = GlslSource::fromText("own_length", "float own_length(float s, uint b, uint h, uint q, uint k) "
                                                         "{ return s; }\n");
    std::string name() const override { return "OwnLength"; }
    std::string key() const override { return {}; }
    void declare(KernelInterface& k, const DeviceInfo&) const override {
      k.push("kv_len", PushType::U32).snippet(glsl).hook(hook::kScore, "own_length");
    }
    void bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const override { args.set("kv_len", 5u); }
  };
  d.call.modifiers = {std::make_shared<OwnLength>()};
  FusedAttention fa(d.rt);
  EXPECT_THAT(userError([&] { fa.run(d.call); }),
              AllOf(StartsWith("kv_len: "), HasSubstr("modifier OwnLength sets push constant 'kv_len'")));
}

TEST(ApiMisuse, OneFusedAttentionServesACallWithLseAndOneWithout) {
  SmallDecode d;
  FusedAttention fa(d.rt);
  const Tensor lse = d.rt.allocate("lse", DType::F32, {1, 4, 1});
  for (const bool withLse : {false, true, false}) {
    d.call.lse = withLse ? std::optional<Tensor>(lse) : std::nullopt;
    d.rt.poison(d.call.o);
    EXPECT_NO_THROW(fa.run(d.call)) << withLse;
    EXPECT_LT(d.error(), 1e-4) << withLse;
  }
}

TEST(ApiMisuse, ATensorOfAnotherRuntimeIsRefusedByName) {
  SmallDecode d;
  Runtime other(d.rt.options());
  d.call.q = other.allocate("q_elsewhere", DType::F32, {1, 4, 1, 64}, Layout::HeadMajor);
  FusedAttention fa(d.rt);
  EXPECT_THAT(userError([&] { fa.run(d.call); }), AllOf(StartsWith("q: "), HasSubstr("bound as 'q' lives in the memory "
                                                                                  "of another Runtime's device")));
  EXPECT_THAT(userError([&] { d.rt.download(d.call.q); }), HasSubstr("tensor: download of 'q_elsewhere'"));
}

TEST(ApiMisuse, DispatchTimeChecksNameTheCallsParameter) {
  SmallDecode d;
  FusedAttention fa(d.rt);
  d.call.o = d.call.q;  // written over an input: refused before any kernel (tests/foundry/ViewsTest.cpp)
  EXPECT_THAT(userError([&] { fa.run(d.call); }), HasSubstr("o: 'q' shares elements with q 'q'"));
  d.call.o = Tensor::describe("o", DType::F32, {1, 4, 1, 64}, Layout::HeadMajor);  // no memory
  EXPECT_THAT(userError([&] { fa.run(d.call); }), AllOf(StartsWith("o: "), HasSubstr("bound as 'o' has no device memory")));
}

TEST(ApiMisuse, TheDataApiRefusesWhatItCannotDo) {
  Runtime& rt = test::runtime();
  const Tensor shape = Tensor::describe("x", DType::F32, {4});
  EXPECT_THAT(userError([&] { rt.download(shape); }), HasSubstr("tensor: download of 'x'"));
  EXPECT_THAT(userError([&] { rt.upload(shape, std::vector<float>(4, 1.0f)); }), HasSubstr("has no device memory"));
  EXPECT_THAT(userError([&] { rt.poison(shape); }), HasSubstr("tensor: poison of 'x'"));
  const Tensor x = rt.allocate("x", DType::F32, {16});
  EXPECT_THAT(userError([&] { rt.upload(x, std::vector<float>(3, 1.0f)); }), HasSubstr("values: upload to 'x'"));
  const Tensor u = rt.allocate("u", DType::U32, {1});
  EXPECT_THAT(userError([&] { rt.upload(u, std::vector<float>{-1.0f}); }),
              HasSubstr("accepted: whole numbers from 0 to 2^24"));
  EXPECT_THAT(userError([&] { rt.allocate("i", DType::I32, {4}); }), HasSubstr("dtype: 'i': i32 tensors are host-side"));
  Tensor past = x;
  past.offset = 1 << 20;
  EXPECT_THAT(userError([&] { rt.download(past); }), HasSubstr("but its buffer 'x' holds 64"));
}

TEST(ApiMisuse, WaitingForASubmissionNeverMadeIsRefusedNotHung) {
  Runtime& rt = test::runtime();
  EXPECT_THAT(userError([&] { rt.wait(Submission{1u << 30}); }), HasSubstr("submission: 1073741824 was never submitted"));
  auto dispatcher = rt.dispatcher();
  EXPECT_THAT(userError([&] { dispatcher->wait(Submission{1u << 30}); }), HasSubstr("was never submitted"));
}

TEST(ApiMisuse, AttentionOptionsOutsideTheirKnobsValuesAreRefused) {
  Runtime& rt = test::runtime();
  const auto refused = [&](auto set) {
    AttentionOptions o;
    set(o);
    return userError([&] { FusedAttention fa(rt, o); });
  };
  EXPECT_THAT(refused([](AttentionOptions& o) { o.faDecodeWarps = 0; }),
              HasSubstr("FOUNDRY_FA_DECODE_WARPS: invalid value '0'"));
  EXPECT_THAT(refused([](AttentionOptions& o) { o.faDecodeSplitK = 0; }), HasSubstr("FOUNDRY_FA_DECODE_SPLIT_K"));
  EXPECT_THAT(refused([](AttentionOptions& o) { o.faDecodeHeads = 0; }), HasSubstr("FOUNDRY_FA_DECODE_HEADS"));
  EXPECT_THAT(refused([](AttentionOptions& o) { o.faPrefillWarps = 0; }), HasSubstr("FOUNDRY_FA_PREFILL_WARPS"));
  EXPECT_THAT(refused([](AttentionOptions& o) { o.faPrefillSplitK = 0; }), HasSubstr("FOUNDRY_FA_PREFILL_SPLIT_K"));
  EXPECT_THAT(refused([](AttentionOptions& o) { o.faPrefillKeysPerTile = 0; }),
              HasSubstr("FOUNDRY_FA_PREFILL_KEYS_PER_TILE"));
  EXPECT_EQ(refused([](AttentionOptions&) {}), "accepted");
  RuntimeOptions loud = rt.options();
  loud.logLevel = "loud";
  EXPECT_THAT(userError([&] { Runtime r(loud); }), HasSubstr("FOUNDRY_LOG_LEVEL"));
}

TEST(ApiMisuse, APagedAppendNear2To32IsRefusedNotWrapped) {
  Runtime& rt = test::runtime();
  const Tensor kNew = rt.allocate("k_new", DType::F16, {1, 1, 10, 64}, Layout::HeadMajor);
  const Tensor vNew = rt.allocate("v_new", DType::F16, {1, 1, 10, 64}, Layout::HeadMajor);
  const Tensor kPool = rt.allocate("k_pool", DType::F16, {8, 1, 8, 64}, Layout::KvCache);
  const Tensor vPool = rt.allocate("v_pool", DType::F16, {8, 1, 8, 64}, Layout::KvCache);
  PagedKv pages;
  pages.table = {5, 2, 7};
  pages.blockTable = rt.allocate("block_table", DType::U32, {1, 3});
  rt.upload(pages.blockTable, std::span<const std::uint32_t>(pages.table));
  KvAppendStep append(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace ws(rt);
  StepContext ctx{*dispatcher, ws};
  EXPECT_THAT(userError([&] { append.run(ctx, kNew, vNew, kPool, vPool, 0xfffffff8u, std::nullopt, &pages); }),
              HasSubstr("block_table: sequence 0 needs 4294967298 keys"));
  EXPECT_EQ(dispatcher->pending(), 0u);
}

TEST(ApiMisuse, AnAppendOfRowsReadFromTheCacheItWritesIsBlamedOnThem) {
  Runtime& rt = test::runtime();
  const Tensor kCache = rt.allocate("k_cache", DType::F16, {1, 1, 16, 64}, Layout::KvCache);
  const Tensor vCache = rt.allocate("v_cache", DType::F16, {1, 1, 16, 64}, Layout::KvCache);
  const Tensor vNew = rt.allocate("v_new", DType::F16, {1, 1, 2, 64}, Layout::HeadMajor);
  Tensor kNew = kCache;  // rows 0 and 1 of the cache, as a view
  kNew.name = "k_view";
  kNew.dims = {1, 1, 2, 64};
  kNew.layout = Layout::HeadMajor;
  KvAppendStep append(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace ws(rt);
  StepContext ctx{*dispatcher, ws};
  EXPECT_THAT(userError([&] { append.run(ctx, kNew, vNew, kCache, vCache, 0, std::nullopt); }),
              HasSubstr("k_new: 'k_view' lies in the bytes of k_cache 'k_cache'"));
}

TEST(ApiMisuse, RopeValuesWithoutFiniteFrequenciesAreRefused) {
  RopeSpec spec;
  spec.theta = 0.0;
  EXPECT_THAT(userError([&] { spec.validate(64); }), HasSubstr("rope.theta: 0 gives no finite frequencies"));
  spec.theta = 1e4;
  spec.yarn = YarnScaling{.factor = 0.0};
  EXPECT_THAT(userError([&] { spec.inverseFrequencies(64); }), HasSubstr("rope.yarn.factor"));
  spec.yarn = YarnScaling{};
  spec.llama3 = Llama3Scaling{};
  EXPECT_THAT(userError([&] { spec.validate(64); }), HasSubstr("rope.yarn: given with rope.llama3"));
  spec.yarn.reset();
  spec.llama3->highFreqFactor = spec.llama3->lowFreqFactor;
  EXPECT_THAT(userError([&] { spec.validate(64); }), HasSubstr("rope.llama3.high_freq_factor"));
  spec.llama3.reset();
  EXPECT_EQ(userError([&] { spec.validate(64); }), "accepted");
  Runtime& rt = test::runtime();
  const Tensor x = rt.allocate("x", DType::F16, {1, 1, 4, 64}, Layout::HeadMajor);
  const Tensor table = makeRopeTable(rt, spec, 64);
  RopeStep rope(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace ws(rt);
  StepContext ctx{*dispatcher, ws};
  EXPECT_THAT(userError([&] { rope.run(ctx, x, table, spec, 0xfffffffeu); }),
              HasSubstr("pos0: 4 tokens from position 4294967294 pass 2^32 - 1"));
}

/// A modifier whose function is named like the hook point it plugs into.
struct NamedLikeTheHook : AttentionModifier {
  std::string name() const override { return "NamedLikeTheHook"; }
  std::string key() const override { return {}; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.snippetText("named_like_the_hook", "float fa_score(float s, uint b, uint h, uint q, uint k) { return s; }\n")
        .hook(hook::kScore, "fa_score");
  }
};

TEST(ApiMisuse, AFunctionNamedLikeAHookPointIsAUserErrorBeforeCompiling) {
  SmallDecode d;
  d.call.modifiers = {std::make_shared<NamedLikeTheHook>()};
  FusedAttention fa(d.rt);
  EXPECT_THAT(userError([&] { fa.run(d.call); }), HasSubstr("the name of a hook point, whose function the builder "
                                                            "generates"));
}

class MockFixtureMisuse : public test::StepMockTest {
  void TestBody() override {}
 public:
  using StepMockTest::run;
};

TEST(ApiMisuse, TheMockFixtureSaysWhatIsMissingBeforePretend) {
  MockFixtureMisuse f;
  EXPECT_THAT([&] { f.run(AttentionCall{}); }, ::testing::ThrowsMessage<std::logic_error>(HasSubstr("call pretend(")));
}

}  // namespace
}  // namespace foundry
