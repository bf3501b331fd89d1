// `foundry run` in process: a real config end to end on the test device with the check on; the
// memory the flash path needs does not grow with q_len x kv_len, the materialised path's does.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "foundry/Random.h"
#include "foundry/Runtime.h"
#include "foundry/runner/io/Safetensors.h"
#include "foundry/runner/LayerModifiers.h"
#include "foundry/runner/Session.h"
#include "foundry/steps/Options.h"
#include "support/TestRuntime.h"

namespace foundry {
namespace {

class QuietProgress : public Progress {
 public:
  void update(const std::string&, std::uint64_t, std::uint64_t) override {}
};

ModelConfig tinyConfig(std::uint32_t prompt, std::uint32_t decode, std::uint32_t layers) {
  ModelConfig c = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/tinyllama-1.1b.json");
  RunOverrides o;
  o.promptLen = prompt;
  o.decodeTokens = decode;
  o.layers = layers;
  return applyOverrides(c, o);
}

RunReport run(const ModelConfig& c, AttentionPath path, bool check) {
  RunRequest req;
  req.config = c;
  req.path = path;
  req.check = check;
  QuietProgress progress;
  return runModel(test::runtime(), req, progress);
}

TEST(Session, ARealConfigRunsEndToEndAndPassesItsCheck) {
  const RunReport r = run(tinyConfig(40, 5, 2), AttentionPath::Flash, true);
  ASSERT_TRUE(r.check.ran);
  EXPECT_TRUE(r.check.passed) << r.summary();
  EXPECT_GT(r.check.rows, 0u);
  EXPECT_GT(r.prefill.gpuMicros, 0.0);
  EXPECT_GT(r.decode.gpuMicros, 0.0);
  EXPECT_EQ(r.prefill.tokens, 40u);
  EXPECT_EQ(r.decode.tokens, 5u);
  // Prefill per layer: RoPE, KV append, attention; decode per layer and token: KV append, fused decode.
  std::uint64_t attention = 0, appends = 0;
  for (const auto& [kernel, n] : r.kernels) {
    if (kernel.find("SdpaPrefill") != std::string::npos || kernel.find("FlashDecodeFused") != std::string::npos) attention += n;
    if (kernel.find("KvAppend") != std::string::npos) appends += n;
  }
  EXPECT_EQ(attention, 2u * (1 + 5));
  EXPECT_EQ(appends, 2u * (1 + 5));
  EXPECT_GT(r.cacheBytes, 0u);
}

TEST(Session, ABf16RunPassesItsCheck) {
  // bf16 q, K/V caches and o throughout: RoPE, the appends, prefill and the fused decode.
  ModelConfig c = tinyConfig(40, 3, 1);
  c.run.dtype = DType::BF16;
  const RunReport r = run(c, AttentionPath::Flash, true);
  ASSERT_TRUE(r.check.ran);
  EXPECT_TRUE(r.check.passed) << r.summary();
  EXPECT_EQ(r.decode.tokens, 3u);
}

TEST(Session, KvCachesOfTheirOwnTypePassTheCheckAndReportTheirBytesPerToken) {
  // f16 activations with bf16 and f32 caches: the appends convert, the kernels read the cache's type.
  for (const DType kv : {DType::BF16, DType::F32}) {
    ModelConfig c = tinyConfig(40, 3, 2);
    c.run.kvDtype = kv;
    const RunReport r = run(c, AttentionPath::Flash, true);
    ASSERT_TRUE(r.check.ran);
    EXPECT_TRUE(r.check.passed) << dtypeName(kv) << ": " << r.summary();
    // TinyLlama: 4 KV heads of 64, K and V, 2 layers.
    EXPECT_EQ(r.kvBytesPerToken, 2u * 2u * 4u * 64u * dtypeBytes(kv));
    EXPECT_THAT(r.summary(), ::testing::HasSubstr(fmt::format("f16, {} KV cache", dtypeName(kv))));
  }
}

TEST(Session, FlashNeedsNoScratchProportionalToQueriesTimesKeysTheMaterialisedPathDoes) {
  const ModelConfig c = tinyConfig(192, 0, 1);
  const RunReport flash = run(c, AttentionPath::Flash, false);
  const RunReport reference = run(c, AttentionPath::Reference, false);
  const std::uint64_t scores = std::uint64_t(c.run.batch) * c.nHeads * 192 * 192 * 4;  // f32 scores
  // The materialised path holds the whole score matrix, and the report shows it.
  EXPECT_GE(reference.scratchBytes, scores);
  EXPECT_GE(reference.peakDeviceBytes, flash.peakDeviceBytes + scores);
  // Flash holds at most Split-K partials: per query row a few splits of head_dim floats, never per key.
  const std::uint64_t partialsPerRow = 64 * (c.headDim + 2) * 4;
  EXPECT_LE(flash.scratchBytes, std::uint64_t(c.run.batch) * c.nHeads * 192 * partialsPerRow);
  EXPECT_LT(flash.scratchBytes, scores / 4);
  EXPECT_EQ(reference.kernels.count("KvAccess_Causal_ReferenceScores__f16_w1_bottom_right_D64_f16"), 1u);
}

// The JSON report says what ran, with what and why (docs/report.md): version, layout version, time,
// config, every knob with its source, and the Selector's decisions with a reason each.
TEST(Session, TheJsonReportCarriesItsProvenanceAndTheSelectorsReasons) {
  RunRequest req;
  req.config = tinyConfig(40, 2, 1);
  req.configPath = "configs/tinyllama-1.1b.json";
  QuietProgress progress;
  const nlohmann::json j = runModel(test::runtime(), req, progress).toJson();
  EXPECT_EQ(j.at("report_version"), kRunReportVersion);
  EXPECT_EQ(j.at("foundry_version"), FOUNDRY_VERSION);
  EXPECT_TRUE(std::regex_match(j.at("timestamp").get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << j.at("timestamp");
  EXPECT_EQ(j.at("config"), "configs/tinyllama-1.1b.json");
  ASSERT_EQ(j.at("knobs").size(), knobTable().size());
  for (const auto& k : j.at("knobs")) {
    EXPECT_TRUE(k.at("name").get<std::string>().starts_with("FOUNDRY_")) << k;
    EXPECT_TRUE(k.at("value").is_string()) << k;
    EXPECT_FALSE(k.at("source").get<std::string>().empty()) << k;
  }
  std::set<std::string> phases;
  for (const auto& s : j.at("selector")) {
    phases.insert(s.at("phase").get<std::string>());
    EXPECT_FALSE(s.at("kernels").empty()) << s;
    ASSERT_FALSE(s.at("decisions").empty()) << s;
    for (const auto& d : s.at("decisions")) {
      EXPECT_FALSE(d.at("what").get<std::string>().empty()) << d;
      EXPECT_FALSE(d.at("reason").get<std::string>().empty()) << d;
    }
  }
  EXPECT_EQ(phases, (std::set<std::string>{"prefill", "decode"}));
  // A phase that did no work has no rate: null, not 0.
  RunRequest prefillOnly = req;
  prefillOnly.config = tinyConfig(40, 0, 1);
  const nlohmann::json p = runModel(test::runtime(), prefillOnly, progress).toJson();
  EXPECT_TRUE(p.at("decode").at("tokens_per_s").is_null()) << p.at("decode");
  EXPECT_TRUE(p.at("prefill").at("tokens_per_s").is_number()) << p.at("prefill");
}

std::string readBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// gpt-oss-20b cut down: GQA (64 query heads, 8 KV heads), sinks, a 128-key sliding window on layer 0
// that the prompt outgrows, YaRN RoPE; decode forced to three splits merged by a reduce kernel. The
// decode replayed from two recordings writes the same bits as the decode recorded token by token,
// both pass the CPU check (outputs poisoned with NaN first), and the replayed run recorded twice
// (one recording per parameter block) and replayed every other token.
TEST(Session, AReplayedDecodeEqualsTheDecodeRecordedEveryToken) {
  ModelConfig c = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/gpt-oss-20b.json");
  RunOverrides o;
  o.promptLen = 150;
  o.decodeTokens = 6;
  o.layers = 2;
  c = applyOverrides(c, o);
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("foundry-replay-{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::map<std::string, RunReport> reports;
  for (const std::string replay : {"0", "1"}) {
    RunRequest req;
    req.config = c;
    req.check = true;
    req.save = dir / ("o" + replay + ".safetensors");
    req.attention = AttentionOptions::fromEnvironment({{"FOUNDRY_DECODE_REPLAY", replay},
                                                       {"FOUNDRY_FA_DECODE_SPLIT_K", "3"},
                                                       {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}});
    QuietProgress progress;
    reports[replay] = runModel(test::runtime(), req, progress);
  }
  const RunReport &direct = reports.at("0"), &replayed = reports.at("1");
  EXPECT_TRUE(direct.check.passed) << direct.summary();
  EXPECT_TRUE(replayed.check.passed) << replayed.summary();
  EXPECT_EQ(readBytes(dir / "o1.safetensors"), readBytes(dir / "o0.safetensors"));
  EXPECT_EQ(direct.decode.recordings, 0u);
  EXPECT_EQ(direct.decode.replays, 0u);
  EXPECT_EQ(replayed.decode.recordings, 2u) << replayed.decode.rerecorded;
  EXPECT_EQ(replayed.decode.replays, 6u - 2u);
  // The same attention kernels, as often: 2 layers x 6 tokens of append, split decode and reduce.
  for (const auto& [kernel, n] : direct.kernels) {
    EXPECT_EQ(replayed.kernels.count(kernel) ? replayed.kernels.at(kernel) : 0u, n) << kernel;
  }
  EXPECT_GT(replayed.decode.gpuMicros, 0.0);
  std::filesystem::remove_all(dir);
}

TEST(Session, PagedCachesPassTheCheckAndSaveWhatContiguousCachesSave) {
  // Pages of 16 rows shuffled over each layer's pool (45 tokens: the last page partly used), the
  // materialised check reading the same pages; the outputs equal a contiguous run's bit for bit.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("foundry-paged-{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::map<std::uint32_t, RunReport> reports;
  for (const std::uint32_t page : {0u, 16u}) {
    RunRequest req;
    req.config = tinyConfig(40, 5, 2);
    req.config.run.batch = 2;
    req.config.run.pageSize = page;
    req.check = true;
    req.save = dir / fmt::format("o{}.safetensors", page);
    QuietProgress progress;
    reports[page] = runModel(test::runtime(), req, progress);
    EXPECT_TRUE(reports[page].check.passed) << reports[page].summary();
    EXPECT_GT(reports[page].check.maxRelVsMaterialised, 0.0);
  }
  EXPECT_EQ(readBytes(dir / "o16.safetensors"), readBytes(dir / "o0.safetensors"));
  EXPECT_THAT(reports[16].summary(), ::testing::HasSubstr("pages of 16"));
  for (const auto& [kernel, n] : reports[16].kernels) {
    if (kernel.find("KvAccess") != std::string::npos) {
      EXPECT_THAT(kernel, ::testing::HasSubstr("_pg16"));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Session, PromptsOfDifferentLengthsDecodeTogetherAndPassTheCheck) {
  // Three sequences of 1, 17 and 40 prompt tokens decode 4 tokens together (per-sequence lengths,
  // RoPE at each sequence's own position), contiguous and paged (int8 in pages of 32 too).
  for (const auto& [page, kv] : {std::pair{0u, DType::F16}, std::pair{16u, DType::F16}, std::pair{32u, DType::I8}}) {
    ModelConfig c = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/tinyllama-1.1b.json");
    RunOverrides o;
    o.promptLens = "1,17,40";
    o.decodeTokens = 4;
    o.layers = 1;
    o.pageSize = page;
    c = applyOverrides(c, o);
    c.run.kvDtype = kv;
    EXPECT_EQ(c.run.batch, 3u);
    EXPECT_EQ(c.run.promptLen, 40u);
    const RunReport r = run(c, AttentionPath::Flash, true);
    ASSERT_TRUE(r.check.ran);
    EXPECT_TRUE(r.check.passed) << "pages " << page << ": " << r.summary();
    // Every sequence's first, middle, last prompt position and first and last decode token.
    EXPECT_EQ(r.check.rows, (1u + 3u + 3u) * 32u + 3u * 2u * 32u) << r.summary();
    EXPECT_EQ(r.prefill.tokens, 58u);
    EXPECT_EQ(r.decode.tokens, 12u);
    EXPECT_THAT(r.summary(), ::testing::HasSubstr("lengths 1/17/40"));
    // The CPU rows only: the report says no materialised comparison was made, not that it read 0.
    EXPECT_FALSE(r.check.materialisedRan);
    EXPECT_TRUE(r.toJson()["check"]["max_rel_vs_materialised"].is_null());
    // The reference path agrees.
    EXPECT_TRUE(run(c, AttentionPath::Reference, true).check.passed);
  }
}

TEST(Session, TheMaterialisedCheckReadsTheInt8CachesAsThePrefillLeftThem) {
  // Decode rows 20x (K) and 50x (V) the prompt's in the prompt's int8 block of 32 keys: each append grows
  // the block's scale and requantizes the prompt's rows. The prefill read them before, and so must its
  // check. (q at a fifth, so that the coarser prompt rows stay within the CPU check's int8 bound.)
  ModelConfig c = tinyConfig(20, 4, 1);
  c.run.kvDtype = DType::I8;
  const std::int64_t T = 24, kvRow = std::int64_t(c.nKvHeads) * c.headDim;
  std::vector<NamedTensor> inputs;
  for (const auto& [name, heads, seed] : {std::tuple{"q", c.nHeads, 1u}, {"k", c.nKvHeads, 2u}, {"v", c.nKvHeads, 3u}}) {
    const std::string n = name;
    auto values = randomUniforms(seed, 0, std::size_t(T) * heads * c.headDim, n == "q" ? 0.2f : 1.0f);
    for (std::size_t i = 20 * kvRow; n != "q" && i < values.size(); ++i) values[i] *= n == "k" ? 20.0f : 50.0f;
    inputs.push_back({name, {1, 1, T, heads, c.headDim}, std::move(values)});
  }
  const auto file = std::filesystem::temp_directory_path() / fmt::format("foundry-int8-grow-{}.safetensors", ::getpid());
  writeSafetensors(file, inputs, DType::F16);
  RunRequest req;
  req.config = c;
  req.check = true;
  req.inputs = file;
  QuietProgress progress;
  const RunReport r = runModel(test::runtime(), req, progress);
  std::filesystem::remove(file);
  ASSERT_TRUE(r.check.materialisedRan);
  EXPECT_TRUE(r.check.passed) << r.summary();
  // The same cache, the same rows: only the two paths' own rounding apart.
  EXPECT_LT(r.check.maxRelVsMaterialised, 1e-3) << r.summary();
  EXPECT_EQ(r.toJson()["check"]["max_rel_vs_materialised"], r.check.maxRelVsMaterialised);
  // K and V: 4 heads x 64 codes a token, and an f16 scale per 32 keys x 32 dims: 16 bytes per 32 tokens.
  EXPECT_EQ(r.kvBytesPerToken, 2u * (4u * 64u) + 1u);
}

TEST(Session, TheKernelCatalogOfAConfigListsEveryKernelItsRunBuilds) {
  // `foundry kernels --config` lists what a run builds, the cache's type and pages included.
  for (const auto& [kv, page] : {std::pair{DType::F16, 0u}, std::pair{DType::I8, 32u}, std::pair{DType::Q8_0, 16u}}) {
    ModelConfig c = tinyConfig(40, 2, 1);
    c.run.kvDtype = kv;
    c.run.pageSize = page;
    const RunReport r = run(c, AttentionPath::Flash, false);
    std::set<std::string> listed;
    Runtime& rt = test::runtime();
    for (const auto& e : attentionKernels(attentionLayoutOf(c), rt.info(), rt.snippets(), AttentionOptions{})) {
      listed.insert(e.kernel.name);
    }
    for (const auto& [kernel, n] : r.kernels) {
      if (kernel.starts_with("RandomFill")) continue;  // the run's synthetic inputs
      EXPECT_TRUE(listed.count(kernel)) << dtypeName(kv) << " pages " << page << ": " << kernel << " not listed";
    }
  }
}

// Values narrower than keys: DeepSeek-V2-Lite's absorbed MLA (one latent row of 576 per token, values
// its last 512 columns read in place: no value cache, keys-only appends), contiguous, paged and with
// prompts of different lengths; and DeepSeek-V2's own 192/128 heads with a value cache of their own.
// Decode runs the fused kernels, the prompt the materialised path; the CPU check covers both.
TEST(Session, ValuesNarrowerThanKeysDecodeOnTheFusedKernelsAndPassTheCheck) {
  const ModelConfig lite = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/deepseek-v2-lite.json");
  for (const auto& [page, lens] : {std::pair<std::int64_t, std::string>{0, ""}, {16, ""}, {0, "5,30"}}) {
    RunOverrides o;
    o.promptLen = 30;
    o.decodeTokens = 3;
    o.layers = 1;
    o.pageSize = page;
    if (!lens.empty()) o.promptLens = lens;
    const ModelConfig c = applyOverrides(lite, o);
    const RunReport r = run(c, AttentionPath::Flash, true);
    ASSERT_TRUE(r.check.ran);
    EXPECT_TRUE(r.check.passed) << r.summary();
    EXPECT_FALSE(r.check.materialisedRan) << "the prefill itself was materialised";
    EXPECT_EQ(r.kvBytesPerToken, 576u * 2u) << "one latent row per token, no value cache";
    std::uint64_t decodes = 0, appends = 0;
    for (const auto& [kernel, n] : r.kernels) {
      if (kernel.find("FlashDecode") != std::string::npos) decodes += n;
      if (kernel.find("KvAppend") != std::string::npos) {
        appends += n;
        EXPECT_THAT(kernel, ::testing::HasSubstr("_konly")) << "the values are the keys' columns";
      }
      EXPECT_EQ(kernel.find("SdpaPrefill"), std::string::npos) << kernel;
    }
    EXPECT_GT(decodes, 0u) << r.summary();
    EXPECT_GT(appends, 0u) << r.summary();
    EXPECT_THAT(r.summary(), ::testing::HasSubstr("head_dim 576, value_dim 512 (the values are the last columns"));
  }

  ModelConfig v2 = loadModelConfig(FOUNDRY_SOURCE_DIR "/configs/tinyllama-1.1b.json");
  v2.nHeads = 8, v2.nKvHeads = 8, v2.headDim = 192, v2.valueDim = 128;
  v2.rope->rotaryDims = 64;
  v2.run.promptLen = 20, v2.run.decodeTokens = 3, v2.run.layers = 1;
  const RunReport r = run(v2, AttentionPath::Flash, true);
  EXPECT_TRUE(r.check.passed) << r.summary();
  EXPECT_EQ(r.kvBytesPerToken, 8u * (192u + 128u) * 2u);
  EXPECT_TRUE(run(v2, AttentionPath::Reference, true).check.passed);
}

// Each knob's source: the environment, the config's `tuning` (its JSON pointer), a flag, or the default;
// an error about a value from `tuning` names the pointer.
TEST(Session, KnobSourcesNameWhereEachValueCameFrom) {
  Options o = Options::fromEnvironment({{"FOUNDRY_FA_DECODE_WARPS", "4"}});
  o.applyTuning(nlohmann::json{{"fa_decode_vec", 2}}, "/tuning");
  o.set("FOUNDRY_LOG_LEVEL", "error", "--log-level");
  std::map<std::string, std::string> sources;
  for (const auto& k : knobReport(o)) sources[k.name] = k.source;
  EXPECT_EQ(sources.at("FOUNDRY_FA_DECODE_WARPS"), "environment");
  EXPECT_EQ(sources.at("FOUNDRY_FA_DECODE_VEC"), "/tuning/fa_decode_vec");
  EXPECT_EQ(sources.at("FOUNDRY_LOG_LEVEL"), "--log-level");
  EXPECT_EQ(sources.at("FOUNDRY_FA_DECODE_UNROLL"), "default");
  EXPECT_EQ(o.attention.fieldOf("FOUNDRY_FA_DECODE_VEC"), "/tuning/fa_decode_vec");
  EXPECT_EQ(o.attention.fieldOf("FOUNDRY_FA_DECODE_WARPS"), "FOUNDRY_FA_DECODE_WARPS");
  EXPECT_EQ(o.runtime.sourceOf("FOUNDRY_LOG_LEVEL"), "--log-level");
}

}  // namespace
}  // namespace foundry
