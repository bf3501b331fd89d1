// The model configs in configs/, the loader's rules (every rejected input names its JSON pointer),
// the schema kept equal to the loader, and command-line overrides.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"
#include "foundry/runner/ConfigSchema.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/steps/Options.h"
#include "support/TempDir.h"

namespace foundry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

const std::filesystem::path kSourceDir = FOUNDRY_SOURCE_DIR;
const std::filesystem::path kConfigDir = kSourceDir / "configs";

std::string readText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::filesystem::path> shippedConfigs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(kConfigDir)) {
    if (e.path().extension() == ".json" && e.path().filename() != "schema.json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A small valid config every bad-config row starts from.
json baseConfig() {
  return json::parse(R"({
    "name": "Base",
    "source": "test/base",
    "attention": {
      "layers": 32, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "max_context": 4096,
      "rope": {"theta": 500000.0, "pairing": "rotate_half"}
    },
    "run": {"batch": 1, "prompt_len": 64, "decode_tokens": 8, "dtype": "f16"}
  })");
}

// The base with every optional field present, so removing any one of them is meaningful.
json fullConfig() {
  json c = baseConfig();
  c["$schema"] = "schema.json";
  c["note"] = "every optional field";
  c["attention"]["rope"]["rotary_dims"] = 64;
  c["attention"]["rope"]["scaling"] = {{"type", "llama3"},           {"factor", 8.0},
                                       {"low_freq_factor", 1.0},     {"high_freq_factor", 4.0},
                                       {"original_max_position", 2048}};
  c["attention"]["query_pre_attn_scalar"] = 144;
  c["attention"]["modifiers"] = json::parse(R"([
    {"type": "sliding_window", "window": 1024, "layers": {"every": 2, "offset": 1}},
    {"type": "soft_cap", "cap": 30.0, "layers": [0, 3]},
    {"type": "sinks"}
  ])");
  c["run"]["layers"] = 2;
  c["run"]["seed"] = 7;
  c["run"]["check"] = false;
  c["tuning"] = {{"fa_decode_warps", 4}};
  return c;
}

constexpr const char* kOrigin = "base.json";

// ---------------------------------------------------------------------------------------------
// (a) The shipped configs.

TEST(ModelConfig, EveryShippedConfigLoads) {
  const auto files = shippedConfigs();
  ASSERT_GE(files.size(), 12u) << "configs/ should hold the twelve model layouts";
  std::set<std::string> names;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    ModelConfig c;
    ASSERT_NO_THROW(c = loadModelConfig(f));
    EXPECT_FALSE(c.source.empty());
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate name " << c.name;
    // Defaults small enough for a run on a CPU Vulkan driver; the note says how to go full size.
    EXPECT_EQ(c.run.batch, 1u);
    EXPECT_LE(c.totalTokens(), 128u);
    EXPECT_LE(c.run.layers, 4u);
    EXPECT_TRUE(c.run.check);
  }
}

struct Published {
  const char* file;
  const char* source;
  std::uint32_t layers, nHeads, nKvHeads, headDim, maxContext;
  double theta;
  std::uint32_t rotaryDims;  // 0: all of head_dim
  bool llama3;
};

// The numbers of each model's Hugging Face config.json, so an accidental edit is caught.
TEST(ModelConfig, ShippedConfigsMatchThePublishedModels) {
  const Published models[] = {
      {"llama-3.1-8b.json", "meta-llama/Llama-3.1-8B", 32, 32, 8, 128, 131072, 500000.0, 0, true},
      {"llama-3.1-70b.json", "meta-llama/Llama-3.1-70B", 80, 64, 8, 128, 131072, 500000.0, 0, true},
      {"qwen2.5-7b.json", "Qwen/Qwen2.5-7B", 28, 28, 4, 128, 131072, 1e6, 0, false},
      {"mistral-7b-v0.3.json", "mistralai/Mistral-7B-v0.3", 32, 32, 8, 128, 32768, 1e6, 0, false},
      {"tinyllama-1.1b.json", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", 22, 32, 4, 64, 2048, 1e4, 0, false},
      {"pythia-1.4b.json", "EleutherAI/pythia-1.4b", 24, 16, 16, 128, 2048, 1e4, 32, false},
      {"mistral-7b-v0.1.json", "mistralai/Mistral-7B-v0.1", 32, 32, 8, 128, 32768, 1e4, 0, false},
      {"gpt-oss-20b.json", "openai/gpt-oss-20b", 24, 64, 8, 64, 131072, 150000.0, 0, false},
      {"phi-3-mini-4k.json", "microsoft/Phi-3-mini-4k-instruct", 32, 32, 32, 96, 4096, 1e4, 0, false},
      {"phi-2.json", "microsoft/phi-2", 32, 32, 32, 80, 2048, 1e4, 32, false},  // partial_rotary_factor 0.4
  };
  for (const auto& m : models) {
    SCOPED_TRACE(m.file);
    const ModelConfig c = loadModelConfig(kConfigDir / m.file);
    EXPECT_EQ(c.source, m.source);
    EXPECT_EQ(c.layers, m.layers);
    EXPECT_EQ(c.nHeads, m.nHeads);
    EXPECT_EQ(c.nKvHeads, m.nKvHeads);
    EXPECT_EQ(c.headDim, m.headDim);
    EXPECT_EQ(c.maxContext, m.maxContext);
    EXPECT_EQ(c.rope->theta, m.theta);
    EXPECT_EQ(c.rope->rotaryDims, m.rotaryDims);
    EXPECT_EQ(c.rope->pairing, RopePairing::RotateHalf);
    ASSERT_EQ(c.rope->llama3.has_value(), m.llama3);
    if (m.llama3) {
      EXPECT_EQ(c.rope->llama3->factor, 8.0);
      EXPECT_EQ(c.rope->llama3->lowFreqFactor, 1.0);
      EXPECT_EQ(c.rope->llama3->highFreqFactor, 4.0);
      EXPECT_EQ(c.rope->llama3->originalMaxPosition, 8192.0);
    }
  }
}

// The modifiers, scales and rope scalings of the configs that use them, from each published config.
TEST(ModelConfig, ShippedModifiersMatchThePublishedModels) {
  using K = ModifierConfig::Kind;
  const ModelConfig oss = loadModelConfig(kConfigDir / "gpt-oss-20b.json");
  // layer_types alternate sliding_attention (even layers), full_attention; sinks on every layer.
  ASSERT_EQ(oss.modifiersOf(0).size(), 2u);
  EXPECT_EQ(oss.modifiersOf(0)[0].kind, K::SlidingWindow);
  EXPECT_EQ(oss.modifiersOf(0)[0].left, 127u);
  EXPECT_EQ(oss.modifiersOf(0)[0].right, 0u);
  EXPECT_EQ(oss.modifiersOf(0)[1].kind, K::Sinks);
  ASSERT_EQ(oss.modifiersOf(1).size(), 1u);
  EXPECT_EQ(oss.modifiersOf(1)[0].kind, K::Sinks);
  EXPECT_EQ(oss.modifiersOf(22).size(), 2u);
  ASSERT_TRUE(oss.rope && oss.rope->yarn);
  EXPECT_EQ(oss.rope->yarn->factor, 32.0);
  EXPECT_EQ(oss.rope->yarn->originalMaxPosition, 4096.0);
  EXPECT_EQ(oss.rope->yarn->betaFast, 32.0);
  EXPECT_EQ(oss.rope->yarn->betaSlow, 1.0);
  EXPECT_FALSE(oss.rope->yarn->truncate);
  EXPECT_NEAR(oss.rope->attentionScale(), 0.1 * std::log(32.0) + 1.0, 1e-12);

  const ModelConfig mistral = loadModelConfig(kConfigDir / "mistral-7b-v0.1.json");
  for (std::uint32_t l : {0u, 17u, 31u}) {
    ASSERT_EQ(mistral.modifiersOf(l).size(), 1u);
    EXPECT_EQ(mistral.modifiersOf(l)[0].left, 4095u);
  }
  // Phi-3-mini-4k: sliding_window 2047 on every layer, as transformers masks it (q - 2047 < k <= q).
  const ModelConfig phi3 = loadModelConfig(kConfigDir / "phi-3-mini-4k.json");
  for (std::uint32_t l : {0u, 31u}) {
    ASSERT_EQ(phi3.modifiersOf(l).size(), 1u);
    EXPECT_EQ(phi3.modifiersOf(l)[0].kind, K::SlidingWindow);
    EXPECT_EQ(phi3.modifiersOf(l)[0].left, 2046u);
    EXPECT_EQ(phi3.modifiersOf(l)[0].right, 0u);
  }
  EXPECT_TRUE(loadModelConfig(kConfigDir / "phi-2.json").modifiersOf(0).empty());
  const ModelConfig mpt = loadModelConfig(kConfigDir / "mpt-7b.json");
  EXPECT_FALSE(mpt.rope.has_value()) << "MPT has no rotary embedding";
  EXPECT_EQ(mpt.nHeads, 32u);
  EXPECT_EQ(mpt.nKvHeads, 32u);
  EXPECT_EQ(mpt.headDim, 128u);
  EXPECT_EQ(mpt.maxContext, 2048u);
  ASSERT_EQ(mpt.modifiersOf(5).size(), 1u);
  EXPECT_EQ(mpt.modifiersOf(5)[0].kind, K::Alibi);

  // Gemma 2: head_dim 256, and a softmax scale from query_pre_attn_scalar.
  const json gemma = json::parse(readText(kConfigDir / "gemma-2-9b.json"));
  EXPECT_EQ(gemma["attention"]["query_pre_attn_scalar"], 256);
  EXPECT_EQ(gemma["attention"]["modifiers"][0]["cap"], 50.0);
  const ModelConfig g = parseModelConfig(gemma.dump(), "gemma-2-9b.json");
  EXPECT_EQ(g.headDim, 256u);
  EXPECT_DOUBLE_EQ(g.softmaxScale, 1.0 / 16.0);
  EXPECT_EQ(g.modifiersOf(0).size(), 2u);
  EXPECT_EQ(g.modifiersOf(1).size(), 1u);
  EXPECT_EQ(g.modifiersOf(1)[0].kind, K::SoftCap);
  EXPECT_EQ(g.modifiersOf(0)[1].left, 4095u);
}

// DeepSeek-V2-Lite (config.json: 16 heads, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128,
// YaRN factor 40 over 4096 with mscale = mscale_all_dim = 0.707) as the absorbed MLA decode reads it.
TEST(ModelConfig, DeepSeekV2LiteIsAbsorbedMla) {
  const ModelConfig c = loadModelConfig(kConfigDir / "deepseek-v2-lite.json");
  EXPECT_EQ(c.source, "deepseek-ai/DeepSeek-V2-Lite");
  EXPECT_EQ(c.layers, 27u);
  EXPECT_EQ(c.nHeads, 16u);
  EXPECT_EQ(c.nKvHeads, 1u);  // one latent row per token, shared by every head
  EXPECT_EQ(c.headDim, 512u + 64u);
  EXPECT_EQ(c.vDim(), 512u);
  EXPECT_TRUE(c.latentValues);
  EXPECT_EQ(c.maxContext, 163840u);
  ASSERT_TRUE(c.rope && c.rope->yarn);
  EXPECT_EQ(c.rope->rotaryDims, 64u);
  EXPECT_EQ(c.rope->pairing, RopePairing::Interleaved);
  EXPECT_EQ(c.rope->yarn->factor, 40.0);
  EXPECT_EQ(c.rope->yarn->originalMaxPosition, 4096.0);
  EXPECT_NEAR(c.rope->attentionScale(), 1.0, 1e-12);  // mscale / mscale_all_dim
  const double mscale = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(c.softmaxScale, mscale * mscale / std::sqrt(128.0 + 64.0), 1e-12);
}

TEST(ModelConfig, YarnFrequenciesFollowHuggingFace) {
  // transformers' _compute_yarn_parameters for dim 64, base 150000, factor 32, 4096 original
  // positions, beta 32 / 1, truncate false: the ramp runs from dimension 8.09 to 17.40 of 32.
  RopeSpec spec;
  spec.theta = 150000.0;
  spec.yarn = YarnScaling{32.0, 4096.0, 32.0, 1.0, false, std::nullopt, std::nullopt, std::nullopt};
  const auto f = spec.inverseFrequencies(64);
  ASSERT_EQ(f.size(), 32u);
  const double pi = 3.14159265358979323846;
  auto plain = [](int i) { return std::pow(150000.0, -2.0 * i / 64); };
  const double low = 64 * std::log(4096 / (32 * 2 * pi)) / (2 * std::log(150000.0));
  const double high = 64 * std::log(4096 / (1 * 2 * pi)) / (2 * std::log(150000.0));
  EXPECT_NEAR(low, 8.09278, 1e-4);
  for (int i = 0; i < 32; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    EXPECT_NEAR(f[i], plain(i) / 32 * ramp + plain(i) * (1 - ramp), 1e-15 * plain(i)) << i;
  }
  EXPECT_DOUBLE_EQ(f[0], plain(0));         // high frequencies keep theirs
  EXPECT_DOUBLE_EQ(f[31], plain(31) / 32);  // low ones are interpolated
  spec.yarn->attentionFactor = 1.5;
  EXPECT_EQ(spec.attentionScale(), 1.5);
  spec.yarn->attentionFactor.reset();
  spec.yarn->mscale = 1.0;
  spec.yarn->mscaleAllDim = 0.5;
  EXPECT_NEAR(spec.attentionScale(), (0.1 * std::log(32.0) + 1) / (0.05 * std::log(32.0) + 1), 1e-12);
}

TEST(ModelConfig, OptionalFieldsAndDefaults) {
  const ModelConfig base = parseModelConfig(baseConfig().dump(), kOrigin);
  EXPECT_EQ(base.rope->rotaryDims, 0u);
  EXPECT_EQ(base.rope->dims(base.headDim), 128u);
  EXPECT_FALSE(base.rope->llama3.has_value());
  EXPECT_EQ(base.run.layers, 32u) << "run.layers defaults to all layers";
  EXPECT_EQ(base.run.seed, 1u);
  EXPECT_TRUE(base.run.check);
  EXPECT_EQ(base.run.dtype, DType::F16);
  EXPECT_TRUE(base.tuning.is_object() && base.tuning.empty());
  EXPECT_TRUE(base.note.empty());
  EXPECT_EQ(base.group(), 4u);

  const ModelConfig full = parseModelConfig(fullConfig().dump(), kOrigin);
  EXPECT_EQ(full.rope->rotaryDims, 64u);
  ASSERT_TRUE(full.rope->llama3.has_value());
  EXPECT_EQ(full.rope->llama3->originalMaxPosition, 2048.0);
  EXPECT_EQ(full.run.layers, 2u);
  EXPECT_EQ(full.run.seed, 7u);
  EXPECT_FALSE(full.run.check);
  EXPECT_EQ(full.note, "every optional field");
  EXPECT_EQ(full.tuning, (json{{"fa_decode_warps", 4}}));

  json interleavedF32 = baseConfig();
  interleavedF32["attention"]["rope"]["pairing"] = "interleaved";
  interleavedF32["run"]["dtype"] = "f32";
  interleavedF32["run"]["seed"] = 18446744073709551615ull;
  interleavedF32["run"]["decode_tokens"] = 0;  // a prefill-only run
  const ModelConfig c = parseModelConfig(interleavedF32.dump(), kOrigin);
  EXPECT_EQ(c.rope->pairing, RopePairing::Interleaved);
  EXPECT_EQ(c.run.dtype, DType::F32);
  EXPECT_EQ(c.run.seed, 18446744073709551615ull);
  EXPECT_EQ(c.run.decodeTokens, 0u);
}

TEST(ModelConfig, BoundaryValuesAreAccepted) {
  const auto maximum = [](const char* field) {
    return static_cast<std::int64_t>(schemaRangeAt(json::object(), field).maximum);
  };
  json c = baseConfig();
  c["attention"]["max_context"] = maximum("/attention/max_context");
  c["run"]["prompt_len"] = maximum("/attention/max_context") - 8;  // prompt_len + decode_tokens == max_context
  c["run"]["batch"] = maximum("/run/batch");
  c["attention"]["n_heads"] = maximum("/attention/n_heads");
  c["attention"]["n_kv_heads"] = 1;
  c["attention"]["layers"] = maximum("/attention/layers");
  c["attention"]["rope"]["rotary_dims"] = 128;
  EXPECT_NO_THROW(parseModelConfig(c.dump(), kOrigin));
}

// ---------------------------------------------------------------------------------------------
// (b) Rejected configs: each names its JSON pointer, says what was expected and found.

struct BadConfig {
  std::string name;
  std::function<std::string()> text;
  ErrorKind kind;
  std::string pointer;
  std::string fragment;
};

std::ostream& operator<<(std::ostream& os, const BadConfig& b) { return os << b.name; }

// Setting, removing and rewriting parts of the base config.
std::function<std::string()> with(std::function<void(json&)> mutate, json start = baseConfig()) {
  return [=] {
    json c = start;
    mutate(c);
    return c.dump(2);
  };
}
std::function<std::string()> set(const std::string& pointer, json value) {
  return with([=](json& c) { c[json::json_pointer(pointer)] = value; });
}
std::function<std::string()> erase(const std::string& pointer) {
  return with([=](json& c) {
    const json::json_pointer p(pointer);
    c[p.parent_pointer()].erase(p.back());
  });
}
std::function<std::string()> eraseFromFull(const std::string& pointer) {
  return with(
      [=](json& c) {
        const json::json_pointer p(pointer);
        c[p.parent_pointer()].erase(p.back());
      },
      fullConfig());
}
// Replaces the value of `key` in the compact dump, for numbers nlohmann cannot hold.
std::function<std::string()> rawValue(const std::string& key, const std::string& raw) {
  return [=] {
    std::string s = baseConfig().dump();
    const std::string needle = "\"" + key + "\":";
    const auto at = s.find(needle) + needle.size();
    const auto end = s.find_first_of(",}", at);
    return s.replace(at, end - at, raw);
  };
}
std::function<std::string()> text(std::string t) {
  return [=] { return t; };
}

const BadConfig kBadConfigs[] = {
    // Malformed JSON: field "" and the position as line:column.
    {"EmptyText", text(""), ErrorKind::User, "", "malformed JSON at line 1, column 1"},
    {"GarbageOnLine3", text("{\n  \"name\": \"x\",\n  oops\n}"), ErrorKind::User, "",
     "malformed JSON at line 3, column 3"},
    {"TrailingGarbage", [] { return baseConfig().dump() + "\n]"; }, ErrorKind::User, "", "malformed JSON at line 2"},
    {"TruncatedText", [] { return baseConfig().dump(2).substr(0, 40); }, ErrorKind::User, "", "malformed JSON at line"},
    {"NumberOverflow", rawValue("n_heads", "1e400"), ErrorKind::User, "", "number overflow"},
    {"NulByteEndsNothing", [] { return baseConfig().dump() + std::string("\0{", 2); }, ErrorKind::User, "",
     "a NUL byte"},
    {"InvalidUtf8", text("{\"name\": \"\xff\"}"), ErrorKind::User, "", "malformed JSON at line 1, column 11"},
    {"DuplicateKey", text(R"({"name": "a", "attention": {"layers": 1, "layers": 2}})"), ErrorKind::User,
     "/attention/layers", "duplicate key \"layers\""},
    {"DeepNesting", text(std::string(5000, '[') + std::string(5000, ']')), ErrorKind::User, [] {
       std::string p;
       for (int i = 0; i < 32; ++i) p += "/0";
       return p;
     }(), "nested deeper than 32"},
    {"TopLevelArray", text("[1, 2]"), ErrorKind::User, "", "expected an object, found an array"},
    {"TopLevelNull", text("null"), ErrorKind::User, "", "expected an object, found null"},
    // Missing fields.
    {"MissingName", erase("/name"), ErrorKind::User, "/name", "missing required key \"name\""},
    {"MissingSource", erase("/source"), ErrorKind::User, "/source", "missing required key"},
    {"MissingAttention", erase("/attention"), ErrorKind::User, "/attention", "missing required key"},
    {"MissingRun", erase("/run"), ErrorKind::User, "/run", "missing required key"},
    {"MissingNHeads", erase("/attention/n_heads"), ErrorKind::User, "/attention/n_heads",
     "required here: layers, n_heads, n_kv_heads, head_dim, max_context"},
    {"MissingTheta", erase("/attention/rope/theta"), ErrorKind::User, "/attention/rope/theta", "missing"},
    {"MissingPairing", erase("/attention/rope/pairing"), ErrorKind::User, "/attention/rope/pairing", "missing"},
    {"MissingScalingFactor", eraseFromFull("/attention/rope/scaling/factor"), ErrorKind::User,
     "/attention/rope/scaling/factor", "missing"},
    {"MissingPromptLen", erase("/run/prompt_len"), ErrorKind::User, "/run/prompt_len", "missing required key"},
    {"MissingDecodeTokens", erase("/run/decode_tokens"), ErrorKind::User, "/run/decode_tokens", "missing"},
    {"MissingDType", erase("/run/dtype"), ErrorKind::User, "/run/dtype", "missing"},
    // Wrong types.
    {"NameIsNumber", set("/name", 3), ErrorKind::User, "/name", "expected a string, found 3"},
    {"EmptyName", set("/name", ""), ErrorKind::User, "/name", "expected a non-empty string"},
    {"LongName", set("/name", std::string(300, 'x')), ErrorKind::User, "/name", "at most 256 characters"},
    {"NoteIsObject", set("/note", json::object()), ErrorKind::User, "/note", "expected a string, found an object"},
    {"LongNote", set("/note", std::string(5000, 'x')), ErrorKind::User, "/note", "at most 4096 characters"},
    {"AttentionIsArray", set("/attention", json::array()), ErrorKind::User, "/attention",
     "expected an object, found an empty array"},
    {"RunIsString", set("/run", "fast"), ErrorKind::User, "/run", "expected an object, found \"fast\" (a string)"},
    {"NHeadsIsString", set("/attention/n_heads", "32"), ErrorKind::User, "/attention/n_heads",
     "expected an integer from 1 to 1024, found \"32\" (a string)"},
    {"NHeadsIsFraction", set("/attention/n_heads", 32.5), ErrorKind::User, "/attention/n_heads", "found 32.5"},
    {"NHeadsIsIntegralFloat", set("/attention/n_heads", 32.0), ErrorKind::User, "/attention/n_heads",
     "expected an integer from 1 to 1024, found 32.0"},
    {"NHeadsIsBool", set("/attention/n_heads", true), ErrorKind::User, "/attention/n_heads", "found true"},
    {"NHeadsIsNull", set("/attention/n_heads", nullptr), ErrorKind::User, "/attention/n_heads", "found null"},
    {"ThetaIsString", set("/attention/rope/theta", "1e4"), ErrorKind::User, "/attention/rope/theta",
     "expected a number greater than 1"},
    {"CheckIsInteger", set("/run/check", 1), ErrorKind::User, "/run/check", "expected true or false, found 1"},
    {"SeedIsNegative", set("/run/seed", -1), ErrorKind::User, "/run/seed",
     "expected an integer from 0 to 18446744073709551615, found -1"},
    {"SeedIsFraction", set("/run/seed", 1.5), ErrorKind::User, "/run/seed", "found 1.5"},
    {"PairingUnknown", set("/attention/rope/pairing", "neox"), ErrorKind::User, "/attention/rope/pairing",
     "expected \"rotate_half\" or \"interleaved\", found \"neox\""},
    {"PairingIsNumber", set("/attention/rope/pairing", 0), ErrorKind::User, "/attention/rope/pairing", "found 0"},
    {"ScalingIsArray", set("/attention/rope/scaling", json::array()), ErrorKind::User, "/attention/rope/scaling",
     "expected an object"},
    // Unknown keys, anywhere.
    {"UnknownTopKey", set("/model_type", "llama"), ErrorKind::User, "/model_type",
     "unknown key \"model_type\"; accepted: $schema, name, source, note, attention, run, tuning"},
    {"UnknownAttentionKey", set("/attention/n_head", 32), ErrorKind::User, "/attention/n_head",
     "unknown key \"n_head\""},
    {"UnknownRopeKey", set("/attention/rope/base", 10000), ErrorKind::User, "/attention/rope/base", "unknown key"},
    {"UnknownScalingKey", with([](json& c) { c["attention"]["rope"]["scaling"]["rope_type"] = "llama3"; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/rope_type", "unknown key \"rope_type\""},
    {"UnknownRunKey", set("/run/prompt_length", 64), ErrorKind::User, "/run/prompt_length",
     "accepted: batch, prompt_len, decode_tokens, layers, dtype, kv_dtype, seed, check"},
    {"UnknownKeyIsEscaped", set("/a~1b~0c", 1), ErrorKind::User, "/a~1b~0c", "unknown key \"a/b~c\""},
    {"UnknownKeyIsReportedBeforeMissing", with([](json& c) {
       c["attention"].erase("n_heads");
       c["attention"]["n_head"] = 32;
     }),
     ErrorKind::User, "/attention/n_head", "unknown key"},
    // Sizes: non-positive, absurd, or beyond 32 bits.
    {"ZeroLayers", set("/attention/layers", 0), ErrorKind::User, "/attention/layers",
     "expected an integer from 1 to 1024, found 0"},
    {"NegativeLayers", set("/attention/layers", -4), ErrorKind::User, "/attention/layers", "found -4"},
    {"ZeroHeads", set("/attention/n_heads", 0), ErrorKind::User, "/attention/n_heads", "found 0"},
    {"TwoToThe40Heads", set("/attention/n_heads", 1ll << 40), ErrorKind::User, "/attention/n_heads",
     "expected an integer from 1 to 1024, found 1099511627776"},
    {"HeadsBeyond64Bits", rawValue("n_heads", "1180591620717411303424"), ErrorKind::User, "/attention/n_heads",
     "expected an integer from 1 to 1024, found 1.1805916207174113e+21"},
    {"MostNegativeKvHeads", rawValue("n_kv_heads", "-9223372036854775808"), ErrorKind::User,
     "/attention/n_kv_heads", "found -9223372036854775808"},
    {"ZeroKvHeads", set("/attention/n_kv_heads", 0), ErrorKind::User, "/attention/n_kv_heads", "found 0"},
    {"ZeroHeadDim", set("/attention/head_dim", 0), ErrorKind::User, "/attention/head_dim", "found 0"},
    {"AbsurdHeadDim", set("/attention/head_dim", 65536), ErrorKind::User, "/attention/head_dim",
     "expected an integer from 1 to 1024, found 65536"},
    {"ZeroMaxContext", set("/attention/max_context", 0), ErrorKind::User, "/attention/max_context", "found 0"},
    {"MaxContextBeyondLimit", set("/attention/max_context", (1 << 24) + 1), ErrorKind::User,
     "/attention/max_context", "expected an integer from 1 to 16777216, found 16777217"},
    {"ZeroBatch", set("/run/batch", 0), ErrorKind::User, "/run/batch", "expected an integer from 1 to 1024, found 0"},
    {"HugeBatch", set("/run/batch", 1 << 20), ErrorKind::User, "/run/batch", "found 1048576"},
    {"ZeroPromptLen", set("/run/prompt_len", 0), ErrorKind::User, "/run/prompt_len", "found 0"},
    {"PromptLenWrapsUint32", set("/run/prompt_len", 4294967297ll), ErrorKind::User, "/run/prompt_len",
     "found 4294967297"},
    {"NegativeDecodeTokens", set("/run/decode_tokens", -1), ErrorKind::User, "/run/decode_tokens",
     "expected an integer from 0 to 16777216, found -1"},
    {"ZeroRunLayers", set("/run/layers", 0), ErrorKind::User, "/run/layers", "found 0"},
    // Rules between fields.
    {"HeadsNotAMultipleOfKvHeads", set("/attention/n_kv_heads", 5), ErrorKind::User, "/attention/n_kv_heads",
     "n_heads (32) must be a multiple of n_kv_heads (5)"},
    {"MoreKvHeadsThanHeads", set("/attention/n_kv_heads", 64), ErrorKind::User, "/attention/n_kv_heads",
     "n_heads (32) must be a multiple of n_kv_heads (64)"},
    {"PromptLenBeyondMaxContext", set("/run/prompt_len", 5000), ErrorKind::User, "/run/prompt_len",
     "prompt_len (5000) exceeds max_context (4096) of Base"},
    {"PromptPlusDecodeBeyondMaxContext", set("/run/prompt_len", 4090), ErrorKind::User, "/run/decode_tokens",
     "prompt_len + decode_tokens = 4090 + 8 = 4098 exceeds max_context (4096)"},
    {"RunLayersBeyondModel", set("/run/layers", 33), ErrorKind::User, "/run/layers",
     "cannot run 33 layers of Base, which has 32"},
    // RoPE.
    {"ThetaOne", set("/attention/rope/theta", 1.0), ErrorKind::User, "/attention/rope/theta",
     "expected a number greater than 1 and at most 1000000000000, found 1.0"},
    {"ThetaNegative", set("/attention/rope/theta", -10000), ErrorKind::User, "/attention/rope/theta", "found -10000"},
    {"ThetaAbsurd", set("/attention/rope/theta", 1e300), ErrorKind::User, "/attention/rope/theta", "found 1e+300"},
    {"RotaryDimsOdd", set("/attention/rope/rotary_dims", 33), ErrorKind::User, "/attention/rope/rotary_dims",
     "expected an even number"},
    {"RotaryDimsZero", set("/attention/rope/rotary_dims", 0), ErrorKind::User, "/attention/rope/rotary_dims",
     "expected an integer from 2 to 1024, found 0"},
    {"RotaryDimsBeyondHeadDim", set("/attention/rope/rotary_dims", 256), ErrorKind::User,
     "/attention/rope/rotary_dims", "rotary_dims (256) cannot exceed head_dim (128)"},
    {"ScalingFactorBelowOne", with([](json& c) { c["attention"]["rope"]["scaling"]["factor"] = 0.5; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/factor", "expected a number of at least 1"},
    {"ScalingLowFreqZero",
     with([](json& c) { c["attention"]["rope"]["scaling"]["low_freq_factor"] = 0; }, fullConfig()), ErrorKind::User,
     "/attention/rope/scaling/low_freq_factor", "expected a number greater than 0"},
    {"ScalingHighNotAboveLow",
     with([](json& c) { c["attention"]["rope"]["scaling"]["high_freq_factor"] = 1.0; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/high_freq_factor",
     "high_freq_factor (1) must be greater than low_freq_factor (1)"},
    {"ScalingOriginalBeyondMaxContext",
     with([](json& c) { c["attention"]["rope"]["scaling"]["original_max_position"] = 8192; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/original_max_position",
     "original_max_position (8192) cannot exceed max_context (4096)"},
    {"ScalingOriginalIsFloat",
     with([](json& c) { c["attention"]["rope"]["scaling"]["original_max_position"] = 2048.5; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/original_max_position", "expected an integer"},
    {"ScalingTypeUnknown", with([](json& c) { c["attention"]["rope"]["scaling"]["type"] = "llama4"; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/type", "expected \"llama3\", found \"llama4\""},
    {"ScalingTypeLongropeIsUnsupported",
     with([](json& c) { c["attention"]["rope"]["scaling"]["type"] = "longrope"; }, fullConfig()),
     ErrorKind::Unsupported, "/attention/rope/scaling/type", "rope scaling \"longrope\" is not supported; supported: llama3"},
    // Supported or not.
    {"KvDTypeUnknown", set("/run/kv_dtype", "f8"), ErrorKind::User, "/run/kv_dtype",
     "expected \"f16\", \"bf16\", \"f32\", \"int8\" or \"q8_0\", found \"f8\""},
    {"DTypeInt8IsACacheFormatOnly", set("/run/dtype", "int8"), ErrorKind::User, "/run/dtype",
     "expected \"f16\", \"bf16\" or \"f32\", found \"int8\""},
    {"DTypeUnknown", set("/run/dtype", "f8"), ErrorKind::User, "/run/dtype",
     "expected \"f16\", \"bf16\" or \"f32\", found \"f8\""},
    {"DTypeAliasIsNotAccepted", set("/run/dtype", "float16"), ErrorKind::User, "/run/dtype", "found \"float16\""},
    {"DTypeIsNumber", set("/run/dtype", 16), ErrorKind::User, "/run/dtype", "found 16"},
    // Tuning: checked by Options::applyTuning, pointer /tuning/<key>.
    {"TuningIsArray", set("/tuning", json::array()), ErrorKind::User, "/tuning", "expected an object of knob values"},
    {"TuningUnknownKnob", set("/tuning/fa_decode_wraps", 4), ErrorKind::User, "/tuning/fa_decode_wraps",
     "unknown tuning key; accepted: disable_fa"},
    {"TuningEnvironmentStyleName", set("/tuning/FOUNDRY_FA_DECODE_WARPS", 4), ErrorKind::User,
     "/tuning/FOUNDRY_FA_DECODE_WARPS", "unknown tuning key"},
    {"TuningBadValue", set("/tuning/fa_decode_warps", 3), ErrorKind::User, "/tuning/fa_decode_warps",
     "invalid value '3'; accepted: auto, 1, 2, 4, 8, 16"},
    {"TuningBadSwitch", set("/tuning/disable_fa", "maybe"), ErrorKind::User, "/tuning/disable_fa",
     "invalid value 'maybe'"},
    {"TuningValueIsObject", set("/tuning/fa_decode_warps", json::object()), ErrorKind::User,
     "/tuning/fa_decode_warps", "expected a string, number or boolean"},
    {"TuningKeyIsEscaped", set("/tuning/fa~1decode", 4), ErrorKind::User, "/tuning/fa~1decode",
     "unknown tuning key \"fa/decode\""},
    // Rope scalings: YaRN has its own object, and one scaling per rope.
    {"YarnAsScalingType", with([](json& c) { c["attention"]["rope"]["scaling"]["type"] = "yarn"; }, fullConfig()),
     ErrorKind::User, "/attention/rope/scaling/type", "YaRN goes in /attention/rope/yarn"},
    {"YarnAndLlama3Together",
     with([](json& c) { c["attention"]["rope"]["yarn"] = {{"factor", 4.0}, {"original_max_position", 1024}}; },
          fullConfig()),
     ErrorKind::User, "/attention/rope/yarn", "one frequency scaling"},
    {"YarnMissingFactor", set("/attention/rope/yarn", {{"original_max_position", 1024}}), ErrorKind::User,
     "/attention/rope/yarn/factor", "missing required key"},
    {"YarnBetasReversed",
     set("/attention/rope/yarn", {{"factor", 4.0}, {"original_max_position", 1024}, {"beta_fast", 1}, {"beta_slow", 32}}),
     ErrorKind::User, "/attention/rope/yarn/beta_fast", "must be greater than beta_slow"},
    {"YarnOriginalBeyondContext", set("/attention/rope/yarn", {{"factor", 4.0}, {"original_max_position", 8192}}),
     ErrorKind::User, "/attention/rope/yarn/original_max_position", "cannot exceed max_context (4096)"},
    {"QueryPreAttnScalarZero", set("/attention/query_pre_attn_scalar", 0), ErrorKind::User,
     "/attention/query_pre_attn_scalar", "greater than 0"},
    {"SoftmaxScaleZero", set("/attention/softmax_scale", 0), ErrorKind::User, "/attention/softmax_scale",
     "greater than 0"},
    {"SoftmaxScaleTwice", with([](json& c) { c["attention"]["softmax_scale"] = 0.1; }, fullConfig()), ErrorKind::User,
     "/attention/softmax_scale", "give the softmax scale once"},
    // Latent values (absorbed MLA): narrower than the keys, clear of the rotated dims, float caches.
    {"LatentValuesWithoutValueDim", set("/attention/latent_values", true), ErrorKind::User, "/attention/value_dim",
     "value_dim must be given and below head_dim (128), found 128"},
    {"LatentValuesUnderTheRotation",
     with([](json& c) {
       c["attention"]["latent_values"] = true;
       c["attention"]["value_dim"] = 96;
     }),
     ErrorKind::User, "/attention/rope/rotary_dims", "the 128 rotated dimensions would overlap the values"},
    {"LatentValuesInInt8",
     with([](json& c) {
       c["attention"]["latent_values"] = true;
       c["attention"]["value_dim"] = 64;
       c["attention"]["rope"]["rotary_dims"] = 64;
       c["run"]["kv_dtype"] = "int8";
     }),
     ErrorKind::Unsupported, "/run/kv_dtype", "int8 caches with latent_values"},
    {"ValueDimZero", set("/attention/value_dim", 0), ErrorKind::User, "/attention/value_dim", "expected an integer from 1"},
    // Modifiers: their type, their keys, per-head lengths, layer patterns, one of a type per layer.
    {"ModifiersNotAnArray", set("/attention/modifiers", json::object()), ErrorKind::User, "/attention/modifiers",
     "expected an array of modifiers"},
    {"ModifierUnknownType", set("/attention/modifiers", json::parse(R"([{"type": "rotary"}])")), ErrorKind::User,
     "/attention/modifiers/0/type", "unknown modifier type \"rotary\"; accepted: sliding_window, soft_cap, alibi, sinks"},
    {"ModifierWithoutType", set("/attention/modifiers", json::parse(R"([{"cap": 3}])")), ErrorKind::User,
     "/attention/modifiers/0/type", "each modifier is an object with a \"type\""},
    {"ModifierForeignKey", set("/attention/modifiers", json::parse(R"([{"type": "soft_cap", "cap": 3, "window": 4}])")),
     ErrorKind::User, "/attention/modifiers/0/window", "unknown key \"window\"; accepted: type, layers, cap"},
    {"WindowAndExtentsTogether",
     set("/attention/modifiers", json::parse(R"([{"type": "sliding_window", "window": 4, "left": 3}])")),
     ErrorKind::User, "/attention/modifiers/0/window", "either \"window\""},
    {"WindowZero", set("/attention/modifiers", json::parse(R"([{"type": "sliding_window", "window": 0}])")),
     ErrorKind::User, "/attention/modifiers/0/window", "expected an integer from 1"},
    {"SoftCapNegative", set("/attention/modifiers", json::parse(R"([{"type": "soft_cap", "cap": -1}])")),
     ErrorKind::User, "/attention/modifiers/0/cap", "greater than 0"},
    {"SinksForTooFewHeads", set("/attention/modifiers", json::parse(R"([{"type": "sinks", "values": [1, 2]}])")),
     ErrorKind::User, "/attention/modifiers/0/values", "one value per query head (32), found 2"},
    {"AlibiSlopeIsString", set("/attention/modifiers", json::parse(R"([{"type": "alibi", "slopes": ["a"]}])")),
     ErrorKind::User, "/attention/modifiers/0/slopes/0", "expected a number"},
    {"LayerBeyondTheModel", set("/attention/modifiers", json::parse(R"([{"type": "sinks", "layers": [1, 32]}])")),
     ErrorKind::User, "/attention/modifiers/0/layers/1", "layer 32 does not exist: Base has layers 0 to 31"},
    {"LayerPatternOffsetTooLarge",
     set("/attention/modifiers", json::parse(R"([{"type": "sinks", "layers": {"every": 2, "offset": 2}}])")),
     ErrorKind::User, "/attention/modifiers/0/layers/offset", "expected an integer from 0 to 1"},
    {"LayerPatternUnknownKey",
     set("/attention/modifiers", json::parse(R"([{"type": "sinks", "layers": {"every": 2, "start": 1}}])")),
     ErrorKind::User, "/attention/modifiers/0/layers/start", "unknown key"},
    {"TwoSinksOnOneLayer",
     set("/attention/modifiers",
         json::parse(R"([{"type": "sinks", "layers": {"every": 2}}, {"type": "sinks", "layers": [3, 4]}])")),
     ErrorKind::User, "/attention/modifiers/1", "modifiers 0 and 1 are both sinks on layer 4"},
};

class RejectedConfig : public ::testing::TestWithParam<BadConfig> {};

TEST_P(RejectedConfig, NamesTheFieldAndWhatWasExpected) {
  const BadConfig& row = GetParam();
  const std::string input = row.text();
  try {
    parseModelConfig(input, kOrigin);
    FAIL() << "accepted:\n" << input;
  } catch (const UserError& e) {
    ASSERT_EQ(row.kind, ErrorKind::User) << "got a UserError: " << e.what();
    EXPECT_EQ(e.field(), row.pointer) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(row.fragment));
    EXPECT_THAT(e.what(), HasSubstr("(in base.json)"));
  } catch (const UnsupportedError& e) {
    ASSERT_EQ(row.kind, ErrorKind::Unsupported) << "got an UnsupportedError: " << e.what();
    EXPECT_THAT(e.what(), HasSubstr(row.pointer + ": "));
    EXPECT_THAT(e.what(), HasSubstr(row.fragment));
    EXPECT_THAT(e.what(), HasSubstr("(in base.json)"));
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, RejectedConfig, ::testing::ValuesIn(kBadConfigs),
                         [](const ::testing::TestParamInfo<BadConfig>& p) { return p.param.name; });

TEST(ModelConfig, TheBaseOfTheRejectedRowsIsValid) {
  EXPECT_NO_THROW(parseModelConfig(baseConfig().dump(), kOrigin));
  EXPECT_NO_THROW(parseModelConfig(fullConfig().dump(), kOrigin));
}

// Byte-level damage to a valid config: a foundry error or a config, never another exception or a crash.
TEST(ModelConfig, DamagedTextOnlyEverFailsWithFoundryErrors) {
  const std::string good = fullConfig().dump(2);
  std::mt19937 gen(1234);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = good;
    const int edits = 1 + static_cast<int>(gen() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = gen() % s.size();
      switch (gen() % 3) {
        case 0: s[at] = static_cast<char>(gen() % 256); break;
        case 1: s.erase(at, 1 + gen() % 8); break;
        default: s.insert(at, 1, "{}[]\",:0-9e"[gen() % 12]); break;
      }
      if (s.empty()) s.push_back('x');
    }
    try {
      parseModelConfig(s, "damaged.json");
    } catch (const UserError&) {
      ++rejected;
    } catch (const UnsupportedError&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "non-foundry exception " << e.what() << " for:\n" << s;
    }
  }
  EXPECT_GT(rejected, 2500);
}

// ---------------------------------------------------------------------------------------------
// Files.

TEST(ModelConfig, FileErrorsNameThePath) {
  test::TempDir dir;
  const auto missing = dir.path() / "missing.json";
  try {
    loadModelConfig(missing);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing.string()));
    EXPECT_THAT(e.what(), HasSubstr("No such file"));
  }
  try {
    loadModelConfig(dir.path());
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("it is a directory"));
  }
  json named1 = baseConfig();
  named1["name"] = 1;
  const auto bad = dir.write("bad.json", named1.dump(2));
  try {
    loadModelConfig(bad);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "/name");
    EXPECT_THAT(e.what(), HasSubstr("(in " + bad.string() + ")"));
  }
}

TEST(ModelConfig, FilesOver16MiBAreRejected) {
  test::TempDir dir;
  // Valid JSON padded with whitespace: only the size is wrong.
  const std::string body = baseConfig().dump();
  const auto big = dir.write("big.json", body + std::string(kMaxConfigBytes + 1 - body.size(), ' '));
  try {
    loadModelConfig(big);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("larger than the limit of 16777216 bytes"));
  }
  const auto justFits = dir.write("fits.json", body + std::string(kMaxConfigBytes - body.size(), ' '));
  EXPECT_NO_THROW(loadModelConfig(justFits));
  EXPECT_THROW(parseModelConfig(body + std::string(kMaxConfigBytes, ' '), "big"), UserError);
}

// The fuzz corpus doubles as a test: valid-* files load, invalid-* files fail with a foundry error.
TEST(ModelConfig, FuzzCorpusSeedsBehaveAsNamed) {
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSourceDir / "tests/fuzz/corpus/config")) {
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    ++seen;
    if (name.starts_with("valid-")) {
      EXPECT_NO_THROW(loadModelConfig(e.path()));
    } else {
      ASSERT_TRUE(name.starts_with("invalid-"));
      EXPECT_THROW(loadModelConfig(e.path()), Error);
    }
  }
  EXPECT_GE(seen, 6);
}

// ---------------------------------------------------------------------------------------------
// The schema documents exactly what the loader reads.

// Every object in the schema with "properties", by the JSON pointer it describes in a config.
void schemaObjects(const json& node, const std::string& pointer, std::vector<std::pair<std::string, json>>& out) {
  if (!node.contains("properties")) return;
  out.emplace_back(pointer, node);
  for (const auto& [key, child] : node["properties"].items()) {
    if (pointer == "/tuning") continue;  // knob values are not objects
    schemaObjects(child, pointer + "/" + key, out);
  }
}

// The keys the loader accepts at `pointer`, from its unknown-key message.
std::set<std::string> acceptedKeys(const std::string& pointer) {
  json c = fullConfig();
  c[json::json_pointer(pointer + "/zz_not_a_key")] = 1;
  try {
    parseModelConfig(c.dump(), kOrigin);
  } catch (const UserError& e) {
    std::string what = e.what();
    const auto from = what.find("accepted: ");
    if (from == std::string::npos) return {"<no list in: " + what + ">"};
    what = what.substr(from + 10, what.find(" (in ") - from - 10);
    std::set<std::string> keys;
    std::stringstream s(what);
    for (std::string k; std::getline(s, k, ',');) keys.insert(k.substr(k.find_first_not_of(' ')));
    return keys;
  }
  return {"<accepted an unknown key>"};
}

TEST(ModelConfigSchema, PropertiesAndRequiredFieldsMatchTheLoader) {
  const json schema = json::parse(readText(kConfigDir / "schema.json"));
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  std::vector<std::pair<std::string, json>> objects;
  schemaObjects(schema, "", objects);
  std::set<std::string> pointers;
  for (const auto& [p, node] : objects) pointers.insert(p);
  EXPECT_EQ(pointers, (std::set<std::string>{"", "/attention", "/attention/rope", "/attention/rope/scaling",
                                             "/attention/rope/yarn", "/run", "/tuning"}));

  for (const auto& [pointer, node] : objects) {
    SCOPED_TRACE("schema object at '" + pointer + "'");
    EXPECT_EQ(node.value("additionalProperties", true), false);
    EXPECT_TRUE(node.contains("description"));
    std::set<std::string> documented;
    for (const auto& [key, child] : node["properties"].items()) {
      documented.insert(key);
      EXPECT_TRUE(child.contains("description")) << key << " has no description";
    }
    EXPECT_EQ(documented, acceptedKeys(pointer));

    // Removing a field from a config with every field: required ones must be reported missing.
    const std::set<std::string> required = node.contains("required") ? node["required"].get<std::set<std::string>>()
                                                                      : std::set<std::string>{};
    for (const auto& key : documented) {
      if (!fullConfig().contains(json::json_pointer(pointer + "/" + key))) continue;  // tuning knobs
      json c = fullConfig();
      c[json::json_pointer(pointer)].erase(key);
      if (required.count(key)) {
        try {
          parseModelConfig(c.dump(), kOrigin);
          ADD_FAILURE() << key << " is required by the schema but not by the loader";
        } catch (const UserError& e) {
          EXPECT_EQ(e.field(), pointer + "/" + key);
          EXPECT_THAT(e.what(), HasSubstr("missing required key"));
        }
      } else {
        EXPECT_NO_THROW(parseModelConfig(c.dump(), kOrigin)) << key << " is optional in the schema";
      }
    }
  }
}

TEST(ModelConfigSchema, TuningPropertiesAreTheKnobs) {
  const json schema = json::parse(readText(kConfigDir / "schema.json"));
  std::set<std::string> documented;
  for (const auto& [key, child] : schema["properties"]["tuning"]["properties"].items()) documented.insert(key);
  std::set<std::string> knobs;
  for (const auto& k : knobTable()) {
    std::string key(k.name.substr(8));
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    knobs.insert(key);
  }
  EXPECT_EQ(documented, knobs) << "configs/schema.json's tuning section must list every knob in knobTable()";
}

// ---------------------------------------------------------------------------------------------
// (c) Command-line overrides.

ModelConfig tinyllama() { return loadModelConfig(kConfigDir / "tinyllama-1.1b.json"); }

TEST(ModelConfigOverrides, ReplaceTheRunAndKeepTheRest) {
  const ModelConfig c = tinyllama();
  const ModelConfig same = applyOverrides(c, {});
  EXPECT_EQ(same.run.promptLen, c.run.promptLen);
  EXPECT_EQ(same.run.layers, c.run.layers);

  RunOverrides o;
  o.batch = 3;
  o.promptLen = 2000;
  o.decodeTokens = 48;  // 2000 + 48 == max_context 2048
  o.layers = 22;
  o.dtype = "f32";
  const ModelConfig r = applyOverrides(c, o);
  EXPECT_EQ(r.run.batch, 3u);
  EXPECT_EQ(r.run.promptLen, 2000u);
  EXPECT_EQ(r.run.decodeTokens, 48u);
  EXPECT_EQ(r.run.layers, 22u);
  EXPECT_EQ(r.run.dtype, DType::F32);
  EXPECT_EQ(r.layers, 22u);
  EXPECT_EQ(r.nHeads, c.nHeads);
  EXPECT_EQ(r.run.seed, c.run.seed);
  EXPECT_EQ(r.name, c.name);
}

struct BadOverride {
  std::string name;
  RunOverrides overrides;
  ErrorKind kind;
  std::string field;
  std::string fragment;
};

std::ostream& operator<<(std::ostream& os, const BadOverride& b) { return os << b.name; }

RunOverrides prompt(std::int64_t v) { return RunOverrides{.promptLen = v}; }
RunOverrides decode(std::int64_t v) { return RunOverrides{.decodeTokens = v}; }

// TinyLlama: max_context 2048, 22 layers; the config runs prompt 64 + decode 8.
const BadOverride kBadOverrides[] = {
    {"ZeroPromptLen", prompt(0), ErrorKind::User, "--prompt-len", "expected an integer from 1 to 16777216, found 0"},
    {"NegativePromptLen", prompt(-5), ErrorKind::User, "--prompt-len", "found -5"},
    {"PromptLenBeyondMaxContext", prompt(4096), ErrorKind::User, "--prompt-len",
     "prompt_len (4096) exceeds max_context (2048) of TinyLlama-1.1B"},
    {"PromptLenPlusConfigDecodeBeyondMaxContext", prompt(2045), ErrorKind::User, "--prompt-len",
     "2045 + 8 = 2053 exceeds max_context (2048)"},
    {"DecodeTokensBeyondMaxContext", decode(2000), ErrorKind::User, "--decode-tokens", "64 + 2000 = 2064"},
    {"NegativeDecodeTokens", decode(-1), ErrorKind::User, "--decode-tokens", "found -1"},
    {"BothBeyondMaxContext", RunOverrides{.promptLen = 2000, .decodeTokens = 100}, ErrorKind::User, "--decode-tokens",
     "2000 + 100 = 2100"},
    {"ZeroBatch", RunOverrides{.batch = 0}, ErrorKind::User, "--batch", "expected an integer from 1 to 1024, found 0"},
    {"AbsurdBatch", RunOverrides{.batch = 1ll << 40}, ErrorKind::User, "--batch", "found 1099511627776"},
    {"LayersBeyondModel", RunOverrides{.layers = 23}, ErrorKind::User, "--layers",
     "cannot run 23 layers of TinyLlama-1.1B, which has 22"},
    {"ZeroLayers", RunOverrides{.layers = 0}, ErrorKind::User, "--layers", "found 0"},
    {"DTypeUnknown", RunOverrides{.dtype = "f64"}, ErrorKind::User, "--dtype", "expected \"f16\", \"bf16\" or \"f32\""},
    {"KvDTypeUnknown", RunOverrides{.kvDtype = "q4"}, ErrorKind::User, "--kv-dtype",
     "expected \"f16\", \"bf16\", \"f32\", \"int8\" or \"q8_0\", found \"q4\""},
    {"PageSizeBeyondRange", RunOverrides{.pageSize = 5000}, ErrorKind::User, "--page-size",
     "expected an integer from 0 to 4096, found 5000"},
    {"Int8PagesCuttingBlocks", RunOverrides{.kvDtype = "int8", .pageSize = 48}, ErrorKind::User, "--page-size",
     "pages of 48 rows would cut int8 blocks of 32 keys; accepted: a page size that is a multiple of 32"},
    {"PromptLensNotNumbers", RunOverrides{.promptLens = "100,abc"}, ErrorKind::User, "--prompt-lens",
     "'100,abc': expected comma-separated integers from 1 to 16777216, found 'abc'"},
    {"PromptLensZero", RunOverrides{.promptLens = "0,5"}, ErrorKind::User, "--prompt-lens", "found '0'"},
    {"PromptLensEmptyItem", RunOverrides{.promptLens = "5,,6"}, ErrorKind::User, "--prompt-lens", "found ''"},
    {"PromptLensForAnotherBatch", RunOverrides{.batch = 2, .promptLens = "5,6,7"}, ErrorKind::User, "--prompt-lens",
     "3 prompt lengths for a batch of 2; give one per sequence"},
    {"PromptLensLongerThanPromptLen", RunOverrides{.promptLen = 10, .promptLens = "5,60"}, ErrorKind::User,
     "--prompt-lens", "sequence 1's prompt of 60 tokens is longer than prompt_len (10)"},
    {"PromptLensBeyondMaxContext", RunOverrides{.promptLens = "5,2045"}, ErrorKind::User, "--prompt-lens",
     "2045 + 8 = 2053 exceeds max_context (2048)"},
};

TEST(Overrides, PromptLensSetTheBatchAndTheLongestPrompt) {
  RunOverrides o;
  o.promptLens = "100,2000,7";
  o.pageSize = 64;
  const ModelConfig c = applyOverrides(tinyllama(), o);
  EXPECT_EQ(c.run.batch, 3u);
  EXPECT_EQ(c.run.promptLen, 2000u);
  EXPECT_EQ(c.run.promptLens, (std::vector<std::uint32_t>{100, 2000, 7}));
  EXPECT_EQ(c.run.promptOf(2), 7u);
  EXPECT_EQ(c.run.pageSize, 64u);
}

// --prompt-len alone gives every sequence its prompt, over the run section's per-sequence lengths (a
// config with prompt_lens could not run over MPI ranks, which take one length, even with the flag).
TEST(Overrides, APromptLenReplacesTheRunSectionsPromptLens) {
  json c = baseConfig();
  c["run"]["batch"] = 2;
  c["run"]["prompt_len"] = 60;
  c["run"]["prompt_lens"] = json::array({60, 20});
  EXPECT_EQ(parseModelConfig(c.dump(), kOrigin).run.promptLens, (std::vector<std::uint32_t>{60, 20}));
  const ModelConfig uniform = parseModelConfig(c.dump(), kOrigin, {.promptLen = 30});
  EXPECT_TRUE(uniform.run.promptLens.empty());
  EXPECT_EQ(uniform.run.promptOf(0), 30u);
  EXPECT_EQ(uniform.run.promptOf(1), 30u);
  EXPECT_EQ(uniform.run.batch, 2u);
  // With --prompt-lens as well, those lengths hold, within --prompt-len.
  EXPECT_EQ(parseModelConfig(c.dump(), kOrigin, {.promptLen = 30, .promptLens = "30,5"}).run.promptLens,
            (std::vector<std::uint32_t>{30, 5}));
}

// The rules between fields hold for the run as the flags leave it: a run section beyond max_context
// loads with flags that bring it back, and without them its own field is blamed, with the file.
TEST(Overrides, BringARunSectionBeyondMaxContextBackWithinIt) {
  json c = baseConfig();
  c["run"]["prompt_len"] = 4095;  // + 8 decode tokens: past max_context 4096
  EXPECT_THROW(parseModelConfig(c.dump(), kOrigin), UserError);
  const ModelConfig fixed = parseModelConfig(c.dump(), kOrigin, {.promptLen = 100});
  EXPECT_EQ(fixed.run.promptLen, 100u);
  EXPECT_EQ(parseModelConfig(c.dump(), kOrigin, {.decodeTokens = 1}).totalTokens(), 4096u);
  try {
    parseModelConfig(c.dump(), kOrigin, {.batch = 2});
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "/run/decode_tokens");
    EXPECT_THAT(e.what(), HasSubstr("4095 + 8 = 4103 exceeds max_context (4096)"));
    EXPECT_THAT(e.what(), HasSubstr(kOrigin));
  }
  // A flag's own value is still checked against its range before any rule between fields.
  try {
    parseModelConfig(c.dump(), kOrigin, {.promptLen = 0});
    FAIL() << "accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(e.field(), "--prompt-len");
  }
}

TEST(LayoutFlags, TakeTheRunFieldsRules) {
  const LayoutFlags f = checkLayoutFlags(32, 8, 128, std::nullopt, "int8", 64);
  EXPECT_EQ(f.heads.heads, 32u);
  EXPECT_EQ(f.heads.kvHeads, 8u);
  EXPECT_EQ(f.heads.headDim, 128u);
  EXPECT_EQ(f.dtype, DType::F16);
  EXPECT_EQ(f.cacheType, DType::I8);
  EXPECT_EQ(f.pageSize, 64u);
  EXPECT_EQ(checkLayoutFlags(8, 8, 64, "bf16", std::nullopt, std::nullopt).cacheType, DType::BF16);
  const auto fieldOf = [](auto&& call) {
    try {
      call();
    } catch (const UserError& e) {
      return e.field() + ": " + e.what();
    }
    return std::string("accepted");
  };
  EXPECT_THAT(fieldOf([] { checkLayoutFlags(32, 8, 80, std::nullopt, "q8_0", std::nullopt); }),
              AllOf(StartsWith("--kv-dtype: "), HasSubstr("q8_0 rows are whole blocks of 32 values")));
  EXPECT_THAT(fieldOf([] { checkLayoutFlags(32, 8, 128, std::nullopt, "int8", 16); }),
              AllOf(StartsWith("--page-size: "), HasSubstr("pages of 16 rows would cut int8 blocks of 32 keys")));
  EXPECT_THAT(fieldOf([] { checkLayoutFlags(32, 8, 128, "int8", std::nullopt, std::nullopt); }),
              StartsWith("--dtype: "));
  EXPECT_THAT(fieldOf([] { checkLayoutFlags(32, 8, 128, std::nullopt, std::nullopt, 4097); }),
              StartsWith("--page-size: "));
  EXPECT_THAT(fieldOf([] { checkLayoutFlags(32, 5, 128, std::nullopt, std::nullopt, std::nullopt); }),
              StartsWith("--kv-heads: "));
}

class RejectedOverride : public ::testing::TestWithParam<BadOverride> {};

TEST_P(RejectedOverride, NamesTheFlag) {
  const BadOverride& row = GetParam();
  const ModelConfig c = tinyllama();
  try {
    applyOverrides(c, row.overrides);
    FAIL() << "accepted";
  } catch (const UserError& e) {
    ASSERT_EQ(row.kind, ErrorKind::User) << e.what();
    EXPECT_EQ(e.field(), row.field) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(row.fragment));
  } catch (const UnsupportedError& e) {
    ASSERT_EQ(row.kind, ErrorKind::Unsupported) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(row.field + ": "));
    EXPECT_THAT(e.what(), HasSubstr(row.fragment));
  }
}

INSTANTIATE_TEST_SUITE_P(Flags, RejectedOverride, ::testing::ValuesIn(kBadOverrides),
                         [](const ::testing::TestParamInfo<BadOverride>& p) { return p.param.name; });

}  // namespace
}  // namespace foundry
