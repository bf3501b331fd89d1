// Rows for the kernel cache's entries that are not what they should be (a FIFO, a directory, SPIR-V a
// driver would refuse), for messages that quote what a user wrote (megabytes of it, control
// characters), for a failing run's stderr, and one `foundry run` per knob that `foundry knobs` lists.
// The knob rows are made from knobTable(): a knob without an entry in knobRuns() gets a row that fails.
#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"
#include "foundry/DiskCache.h"
#include "foundry/steps/Options.h"

namespace foundry::errors {

namespace {

// Clang says so through __has_feature, GCC through __SANITIZE_ADDRESS__.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FOUNDRY_ROWS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FOUNDRY_ROWS_ASAN)
#define FOUNDRY_ROWS_ASAN 1
#endif
#ifndef FOUNDRY_ROWS_ASAN
#define FOUNDRY_ROWS_ASAN 0
#endif

namespace fs = std::filesystem;
using Env = std::map<std::string, std::optional<std::string>>;
using Check = std::function<std::string(const CliContext&, const CliOutcome&)>;

/// Fills {tmp}/cache with every lavapipe kernel, then puts `replace` in place of the first entry.
std::function<void(const CliContext&)> replacedEntry(std::function<void(const CliContext&, const fs::path&)> replace) {
  return [replace](const CliContext& ctx) {
    const fs::path entry = firstCacheEntry(ctx);
    fs::remove(entry);
    replace(ctx, entry);
  };
}

/// `words` with an OpExtInstImport of "DebugInfo" before OpMemoryModel: SPIR-V that spirv-val accepts
/// (the set is a registered one) but that a driver without that set (Mesa's) cannot translate.
std::vector<std::uint32_t> withForeignImport(std::vector<std::uint32_t> words) {
  constexpr std::uint32_t kOpExtInstImport = 11, kOpMemoryModel = 14;
  std::size_t at = 5;
  while (at < words.size() && (words[at] & 0xffffu) != kOpMemoryModel) at += words[at] >> 16;
  if (at >= words.size()) throw std::runtime_error("no OpMemoryModel in the cached SPIR-V");
  char name[12] = "DebugInfo";
  std::uint32_t packed[3];
  std::memcpy(packed, name, sizeof packed);
  const std::uint32_t id = words[3]++;  // a fresh result id past the bound
  const std::uint32_t inst[] = {(5u << 16) | kOpExtInstImport, id, packed[0], packed[1], packed[2]};
  words.insert(words.begin() + static_cast<std::ptrdiff_t>(at), std::begin(inst), std::end(inst));
  return words;
}

// ---- `foundry run` of TinyLlama cut down to one layer.

/// `promptLen` prompt tokens (a prefill kernel) and two decode tokens, one layer, with the config's check.
std::vector<std::string> runTinyPrompt(const std::string& promptLen = "16") {
  return runTiny({}, {"--prompt-len", promptLen, "--decode-tokens", "2", "--layers", "1"});
}

/// Runs the cut-down TinyLlama once with {tmp}/cache, then replaces the first entry of `bucket` by
/// `change` of it (stored whole and checksummed, as a cache of another driver would hold it).
std::function<void(const CliContext&)> afterTinyRun(std::string bucket,
                                                    std::function<std::vector<std::byte>(std::vector<std::byte>)> change) {
  return [bucket, change](const CliContext& ctx) {
    copyTiny(ctx);
    ctx.foundry(runTinyPrompt(), kCacheEnv);
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(ctx.tmp / "cache" / bucket)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    if (entries.empty()) throw std::runtime_error("the first run left nothing in the cache's " + bucket);
    const DiskCache cache(ctx.tmp / "cache");
    const std::string key = entries.front().stem().string();
    cache.store(bucket, key, change(cache.load(bucket, key).value()));
  };
}

/// The run passed its check, and so does the next one with the same cache.
std::string passedTwice(const CliContext& ctx, const CliOutcome& o) {
  if (o.out.find("check: passed") == std::string::npos) return "the run did not pass its check";
  const std::string again = ctx.foundry(runTinyPrompt(), kCacheEnv);
  return again.find("check: passed") == std::string::npos ? "the next run did not pass its check:\n" + again : "";
}

/// A check: some kernel the run reports holds `part` in its name, and none holds `absent` (if given).
Check ranKernel(std::string part, std::string absent = {}) {
  return [part, absent](const CliContext&, const CliOutcome& o) -> std::string {
    const std::string kernels = o.out.substr(std::min(o.out.size(), o.out.find("  kernels:")));
    if (lineWith(kernels, part).empty()) return "no kernel named *" + part + "* in:\n" + kernels;
    if (!absent.empty() && !lineWith(kernels, absent).empty()) return "a kernel named *" + absent + "* in:\n" + kernels;
    return "";
  };
}
/// A check: `path` (under {tmp}) exists afterwards and holds a file whose name ends with `suffix`.
Check wroteUnder(std::string path, std::string suffix) {
  return [path, suffix](const CliContext& ctx, const CliOutcome&) -> std::string {
    const fs::path dir = substituteTmp(path, ctx.tmp);
    if (!fs::is_directory(dir)) return dir.string() + " was not created";
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.path().string().ends_with(suffix)) return "";
    }
    return "no *" + suffix + " under " + dir.string();
  };
}

/// How one knob is shown to work: its value, what else the run needs, and what the user sees.
struct KnobRun {
  std::string value;
  std::string shows;  ///< the table's input column, after "`NAME=value`: "
  std::string promptLen = "16";  ///< 128 where prefill must span several tiles to split
  int exitCode = 0;
  std::string fragment;  ///< on stdout for a quiet run, else on stderr
  std::string note;
  Env env = {};          ///< beside the knob (an instrument to see its effect)
  bool logs = false;     ///< the effect is log lines (FOUNDRY_LOG_LEVEL=info)
  std::function<void(const CliContext&)> setup = {};
  Check check = {};
};

const std::string kPassed = "check: passed";

// One entry per knob of knobTable(). A knob whose value cannot run on lavapipe shows its documented
// error or fallback instead.
const std::map<std::string, KnobRun>& knobRuns() {
  static const std::map<std::string, KnobRun> runs = {
      {"FOUNDRY_DISABLE_FA",
       {.value = "1", .shows = "the flash path refused", .exitCode = 3,
        .fragment = "FlashAttentionStep is disabled by FOUNDRY_DISABLE_FA=1"}},
      {"FOUNDRY_SDPA_FORCE_MATERIALIZED",
       {.value = "1", .shows = "the flash path refused", .exitCode = 3,
        .fragment = "FlashAttentionStep is disabled by FOUNDRY_SDPA_FORCE_MATERIALIZED=1"}},
      {"FOUNDRY_DEBUG_SDPA",
       {.value = "1", .shows = "shapes and decisions logged", .fragment = "attention B=1 Hq=32 Hkv=4 q_len=16",
        .logs = true}},
      {"FOUNDRY_DEBUG_SDPA_VERBOSE",
       {.value = "1", .shows = "grids logged too", .fragment = "grid", .logs = true}},
      {"FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE",
       {.value = "1", .shows = "flash and reference compared per shape",
        .fragment = "online compare B=1 Hq=32 Hkv=4 q_len=1 kv_len=17", .logs = true}},
      {"FOUNDRY_FA_PREFILL_WARPS", {.value = "4", .shows = "4 subgroups per prefill workgroup", .fragment = kPassed,
                                    .check = ranKernel("_subgroup_w4_")}},
      {"FOUNDRY_FA_PREFILL_SPLIT_K", {.value = "2", .shows = "prefill split in two", .promptLen = "128",
                                      .fragment = kPassed, .check = ranKernel("SdpaPrefillSplitKReduce")}},
      {"FOUNDRY_DISABLE_FA_PREFILL_SPLITK",
       {.value = "1", .shows = "prefill never split, even where FOUNDRY_FA_PREFILL_SPLIT_K asks", .promptLen = "128",
        .fragment = kPassed, .env = {{"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}},
        .check = ranKernel("SdpaPrefill__", "SplitK")}},
      {"FOUNDRY_FA_PREFILL_COOPMAT",
       {.value = "1", .shows = "cooperative matrices forced on a device without them", .exitCode = 3,
        .fragment = "FOUNDRY_FA_PREFILL_COOPMAT=1 but device"}},
      {"FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX",
       {.value = "1", .shows = "a cooperative-matrix choice on a device without them",
        .fragment = "variant = subgroup (device", .note = "the subgroup prefill runs; the decision says why",
        .env = {{"FOUNDRY_DEBUG_SDPA", "1"}}, .logs = true}},
      {"FOUNDRY_FA_PREFILL_KEYS_PER_TILE", {.value = "16", .shows = "16 keys per prefill tile", .fragment = kPassed,
                                            .check = ranKernel("_bc16_")}},
      {"FOUNDRY_FA_PREFILL_STAGES", {.value = "2", .shows = "two K/V staging buffers in prefill", .fragment = kPassed,
                                     .check = ranKernel("_s2_")}},
      {"FOUNDRY_FA_PREFILL_LOADER",
       {.value = "1", .shows = "a loader subgroup asked of the subgroup prefill (no cooperative matrices)",
        .exitCode = 2, .fragment = "FOUNDRY_FA_PREFILL_LOADER: 1 cannot be used here: a loader subgroup is part of the "
                                   "cooperative-matrix prefill"}},
      {"FOUNDRY_FA_PREFILL_COOPMAT2",
       {.value = "1", .shows = "workgroup-scope matrices asked of a device without cooperative matrices", .exitCode = 2,
        .fragment = "FOUNDRY_FA_PREFILL_COOPMAT2: 1 cannot be used here: the call does not take the cooperative-matrix "
                    "variant"}},
      {"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE",
       {.value = "subgroup", .shows = "subgroup-scope coopmat2 matrices asked of a device without cooperative matrices",
        .exitCode = 2,
        .fragment = "FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE: subgroup cannot be used here: the call does not take the "
                    "cooperative-matrix variant; accepted here: auto"}},
      {"FOUNDRY_GLSLC",
       {.value = "{tmp}/no-such-glslc", .shows = "a glslc that does not run: only coopmat2 kernels would use it, "
                                                "and none are planned here (the run passes)",
        .fragment = kPassed}},
      {"FOUNDRY_FA_PREFILL_PROBE",
       {.value = "1", .shows = "the prefill probe's build of the kernel (the run's check still passes)",
        .fragment = kPassed, .check = ranKernel("_probe")}},
      {"FOUNDRY_FA_DECODE_PROBE",
       {.value = "1", .shows = "the decode probe's build of the kernel (the run's check still passes)",
        .fragment = kPassed, .check = ranKernel("_probe")}},
      {"FOUNDRY_FA_PREFILL_HEADS_FIRST",
       {.value = "0", .shows = "each head's query tiles in turn (heads first by default here)", .fragment = kPassed,
        .check = ranKernel("_subgroup_", "_hf")}},
      {"FOUNDRY_FA_PREFILL_MASK_SPLIT",
       {.value = "0", .shows = "the prefill tile code once, its masks under a run-time flag", .fragment = kPassed,
        .check = ranKernel("_mflag")}},
      {"FOUNDRY_FA_DECODE_WARPS", {.value = "2", .shows = "2 subgroups per decode workgroup", .fragment = kPassed,
                                   .check = ranKernel("_w2_k")}},
      {"FOUNDRY_FA_DECODE_HEADS", {.value = "2", .shows = "2 of the 8 query heads of a KV head per decode workgroup",
                                   .fragment = kPassed, .check = ranKernel("_h2_w")}},
      {"FOUNDRY_FA_DECODE_KEYS_PER_WARP", {.value = "2", .shows = "2 keys per subgroup step", .fragment = kPassed,
                                           .check = ranKernel("_k2_")}},
      {"FOUNDRY_FA_DECODE_SCALAR", {.value = "1", .shows = "decode without subgroup operations", .fragment = kPassed,
                                    .check = ranKernel("_w4_scalar_")}},
      {"FOUNDRY_FA_DECODE_TG_OUT", {.value = "half", .shows = "decode partials kept as half", .fragment = kPassed,
                                    .check = ranKernel("_v4_half")}},
      {"FOUNDRY_FA_DECODE_VEC", {.value = "2", .shows = "2 elements per K/V load", .fragment = kPassed,
                                 .check = ranKernel("_v2_")}},
      {"FOUNDRY_FA_DECODE_UNROLL", {.value = "2", .shows = "2 decode steps' loads together", .fragment = kPassed,
                                    .check = ranKernel("_u2_")}},
      {"FOUNDRY_FA_DECODE_SPLIT_K", {.value = "2", .shows = "decode split in two", .fragment = kPassed,
                                     .check = ranKernel("FlashDecodeSplitKReduce")}},
      {"FOUNDRY_FA_DECODE_Q_SHARED", {.value = "1", .shows = "decode reads q from shared memory at each use",
                                      .fragment = kPassed, .check = ranKernel("_qs_")}},
      {"FOUNDRY_FA_DECODE_IDLE_LANES",
       {.value = "1", .shows = "idle lanes asked where every split divides the row", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_IDLE_LANES: 1 cannot be used here: no split of head_dim 64 over a subgroup of 8"}},
      {"FOUNDRY_FA_DECODE_TAIL_WORDS",
       {.value = "1", .shows = "tail words asked where every split is whole loads", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_TAIL_WORDS: 1 cannot be used here: no split of head_dim 64 over a subgroup of 8 "
                    "leaves whole loads and then words"}},
      {"FOUNDRY_FA_DECODE_SCATTER",
       {.value = "1", .shows = "decode sums each score once per key, one lane group weighing each head's",
        .fragment = kPassed, .check = ranKernel("_sc_")}},
      {"FOUNDRY_FA_DECODE_STEP_SCALES",
       {.value = "1", .shows = "step scales asked of an f16 cache", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_STEP_SCALES: 1 cannot be used here: the K/V cache is f16, not int8"}},
      {"FOUNDRY_FA_DECODE_HALF_PRODUCTS",
       {.value = "1", .shows = "half products asked of an f16 cache", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_HALF_PRODUCTS: 1 cannot be used here: the K/V cache is f16, not int8"}},
      {"FOUNDRY_FA_DECODE_LAZY_RESCALE",
       {.value = "1", .shows = "decode skips the output's rescale where no running maximum grew (a subgroup vote)",
        .fragment = kPassed, .check = ranKernel("_lr_")}},
      {"FOUNDRY_FA_DECODE_GROUP_ROWS",
       {.value = "1", .shows = "decode through the prefill kernels, each GQA group's heads as its rows",
        .fragment = kPassed, .check = ranKernel("Rope__inplace", "FlashDecode")}},
      {"FOUNDRY_FA_DECODE_TENSOR_CORES",
       {.value = "1", .shows = "tensor-core decode asked of a device without cooperative matrices", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_TENSOR_CORES: 1 cannot be used here: device '"}},
      {"FOUNDRY_FA_DECODE_INT8_DOT",
       {.value = "1", .shows = "integer dot products asked of an f16 cache", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_INT8_DOT: 1 cannot be used here: the K/V cache is f16, not int8 or q8_0"}},
      {"FOUNDRY_FA_DECODE_FUSED_REDUCE",
       {.value = "1", .shows = "the split decode merges its own splits", .fragment = kPassed,
        .env = {{"FOUNDRY_FA_DECODE_SPLIT_K", "2"}}, .check = ranKernel("_split_merged", "SplitKReduce")}},
      {"FOUNDRY_FA_DECODE_BATCHED_MERGE",
       {.value = "1", .shows = "the last workgroup's merge loads a batch of splits for all its elements at once",
        .fragment = kPassed,
        .note = "2 heads on 8 subgroups: 2 elements an invocation, whose unrolled merge compiles in seconds (16, the "
                "default's, took the ASan build 124 s)",
        .env = {{"FOUNDRY_FA_DECODE_SPLIT_K", "2"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"},
                {"FOUNDRY_FA_DECODE_WARPS", "8"}, {"FOUNDRY_FA_DECODE_HEADS", "2"}},
        .check = ranKernel("_split_merged_bm", "SplitKReduce")}},
      {"FOUNDRY_FA_DECODE_CLAIMED_KEYS",
       {.value = "8", .shows = "the split decode's last keys claimed a step at a time by the subgroups done first",
        .fragment = kPassed, .env = {{"FOUNDRY_FA_DECODE_SPLIT_K", "2"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}},
        .check = ranKernel("_split_merged_claims", "SplitKReduce")}},
      {"FOUNDRY_FA_DECODE_TILE_PAIRS",
       {.value = "1", .shows = "tile pairs asked where the subgroup kernel decodes", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_TILE_PAIRS: 1 cannot be used here: the pairs are of the tensor-core kernel's "
                    "tiles"}},
      {"FOUNDRY_FA_DECODE_VALUE_HALVES",
       {.value = "1", .shows = "value halves asked where the subgroup kernel decodes", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_VALUE_HALVES: 1 cannot be used here: the halves are of the tensor-core kernel's "
                    "V tiles"}},
      {"FOUNDRY_FA_DECODE_VALUE_REGISTERS",
       {.value = "1", .shows = "V from registers asked where the subgroup kernel decodes", .exitCode = 2,
        .fragment = "FOUNDRY_FA_DECODE_VALUE_REGISTERS: 1 cannot be used here: V's fragments are of the tensor-core "
                    "kernel's tiles"}},
      {"FOUNDRY_DECODE_REPLAY",
       {.value = "1", .shows = "each decode token replayed from one of two recorded command buffers",
        .fragment = "decode replay: 2 recorded, 0 replayed"}},
      {"FOUNDRY_DEVICE", {.value = "llvmpipe", .shows = "the device picked by name", .fragment = "on llvmpipe"}},
      {"FOUNDRY_CACHE_DIR", {.value = "{tmp}/elsewhere", .shows = "the cache written there", .fragment = kPassed,
                             .check = wroteUnder("{tmp}/elsewhere/spirv", ".bin")}},
      {"FOUNDRY_DUMP_KERNELS", {.value = "{tmp}/dump", .shows = "every kernel dumped", .fragment = kPassed,
                                .check = wroteUnder("{tmp}/dump", ".comp")}},
      {"FOUNDRY_KERNEL_DIR",
       {.value = "{tmp}/kernels", .shows = "snippets read from a copy of kernels/", .fragment = kPassed,
        .note = "the dumped kernels hold the copy's marker", .env = {{"FOUNDRY_DUMP_KERNELS", "{tmp}/dump"}},
        .setup =
            [](const CliContext& ctx) {
              fs::copy(ctx.source / "kernels", ctx.tmp / "kernels", fs::copy_options::recursive);
              std::ofstream snippet(ctx.tmp / "kernels" / "rope" / "rope.glsl", std::ios::app);
              snippet << "// from FOUNDRY_KERNEL_DIR\n";
            },
        .check =
            [](const CliContext& ctx, const CliOutcome&) -> std::string {
              for (const auto& e : fs::directory_iterator(ctx.tmp / "dump")) {
                if (e.path().extension() == ".comp" && readText(e.path()).find("from FOUNDRY_KERNEL_DIR") !=
                                                           std::string::npos) {
                  return "";
                }
              }
              return "no dumped kernel holds the snippet from {tmp}/kernels";
            }}},
      {"FOUNDRY_LOG_LEVEL",
       {.value = "error", .shows = "the warning of an unwritable cache directory silenced", .fragment = kPassed,
        .env = {{"FOUNDRY_CACHE_DIR", "{tmp}/not-a-dir/cache"}},
        .setup = [](const CliContext& ctx) { writeBytes(ctx.tmp / "not-a-dir", "a file"); }}},
      {"FOUNDRY_VALIDATION",
       {.value = "1", .shows = "the Khronos validation layer on, with nothing to report", .fragment = kPassed
#if FOUNDRY_ROWS_ASAN
        // The layer leaks at exit (tests/CMakeLists.txt); the sanitizer build checks Foundry, not it.
        , .env = {{"ASAN_OPTIONS", "detect_leaks=0"}}
#endif
       }},
  };
  return runs;
}

CliRow knobRow(const KnobInfo& knob) {
  const std::string name(knob.name);
  const auto it = knobRuns().find(name);
  if (it == knobRuns().end()) {
    return {.id = "Knob" + name.substr(8) + "Untested",
            .area = "knobs",
            .input = fmt::format("`{}`", name),
            .args = {"knobs"},
            .exitCode = 0,
            .fragment = name,
            .quiet = true,
            .check = [name](const CliContext&, const CliOutcome&) {
              return name + " has no end-to-end row: add one to knobRuns() in tests/errors/CacheKnobRows.cpp";
            }};
  }
  const KnobRun& k = it->second;
  Env env = k.env;
  env[name] = k.value;
  if (k.logs) env["FOUNDRY_LOG_LEVEL"] = "info";
  auto setup = k.setup;
  std::string id = "Knob";
  for (const char c : name.substr(8)) {
    if (c != '_') id += c;
  }
  return {.id = id,
          .area = "knobs",
          .input = fmt::format("`{}={}`: {}", name, k.value, k.shows),
          .args = runTinyPrompt(k.promptLen),
          .env = env,
          .setup =
              [setup](const CliContext& ctx) {
                copyTiny(ctx);
                if (setup) setup(ctx);
              },
          .exitCode = k.exitCode,
          .fragment = k.fragment,
          .note = k.note,
          .quiet = k.exitCode == 0 && !k.logs,
          .logs = k.logs,
          .check = k.check};
}

/// TinyLlama's config with the unknown key `key` in /attention, as {tmp}/model.json.
std::function<void(const CliContext&)> tinyWithKey(std::string key) {
  return [key](const CliContext& ctx) {
    nlohmann::json c = nlohmann::json::parse(readText(ctx.source / "configs" / "tinyllama-1.1b.json"));
    c["attention"][key] = 1;
    writeBytes(ctx.tmp / "model.json", c.dump());
  };
}

}  // namespace

std::vector<CliRow> cacheKnobRows() {
  std::vector<CliRow> rows = {
      // ---- Cache entries that are not files, or hold what a driver must not see.
      {.id = "CacheEntryIsAFifo",
       .area = "cache",
       .input = "a FIFO in place of a cache entry",
       .args = kCompile,
       .env = kCacheEnv,
       .setup = replacedEntry([](const CliContext&, const fs::path& p) {
         if (::mkfifo(p.c_str(), 0644) != 0) throw std::runtime_error("mkfifo failed");
       }),
       .exitCode = 0,
       .fragment = "is a FIFO, not a file; removed it and rebuilding it",
       .note = "no hang (30 s limit); evicted, rebuilt, valid for the next run",
       .check = compiledThenAgain(1, 0),
       .timeoutSeconds = 30},
      {.id = "CacheEntryIsADirectory",
       .area = "cache",
       .input = "an empty directory in place of a cache entry",
       .args = kCompile,
       .env = kCacheEnv,
       .setup = replacedEntry([](const CliContext&, const fs::path& p) { fs::create_directory(p); }),
       .exitCode = 0,
       .fragment = "is a directory, not a file; removed it and rebuilding it",
       .note = "evicted, rebuilt, valid for the next run",
       .check = compiledThenAgain(1, 0)},
      {.id = "CacheEntryIsAFullDirectory",
       .area = "cache",
       .input = "a directory holding a file in place of a cache entry",
       .args = kCompile,
       .env = kCacheEnv,
       .setup = replacedEntry([](const CliContext&, const fs::path& p) { writeBytes(p / "keep", "a user's file"); }),
       .exitCode = 0,
       .fragment = "is a directory, not a file, and cannot be removed (Directory not empty); building without it",
       .note = "left alone; every other entry still serves from disk",
       .check = compiledThenAgain(1, 1)},
      {.id = "CacheEntryGarbageSpirv",
       .area = "cache",
       .input = "a whole, checksummed cache entry whose SPIR-V is garbage",
       .args = kCompile,
       .env = kCacheEnv,
       .setup = replacedEntry([](const CliContext& ctx, const fs::path& p) {
         const std::uint32_t words[] = {0x07230203u, 0x00010500u, 0xdeadbeefu, 0x00000010u, 0x12345678u};
         DiskCache(ctx.tmp / "cache")
             .store("spirv", p.stem().string(), std::as_bytes(std::span(words)));
       }),
       .exitCode = 0,
       .fragment = "holds SPIR-V that spirv-val rejects",
       .note = "never handed to the driver; evicted, rebuilt, valid for the next run",
       .check = compiledThenAgain(1, 0)},
      {.id = "CacheEntrySpirvTheDriverRefuses",
       .area = "cache",
       .input = "a cached kernel whose SPIR-V passes spirv-val but imports an instruction set the driver lacks",
       .args = runTinyPrompt(),
#if FOUNDRY_ROWS_ASAN
       // Mesa's translator leaks the module it gave up on (lavapipe 22.3.6, frames in the driver only);
       // the sanitizer build checks Foundry's recovery, not the driver's failure path.
       .env = {{"FOUNDRY_CACHE_DIR", "{tmp}/cache"}, {"ASAN_OPTIONS", "detect_leaks=0"}},
#else
       .env = kCacheEnv,
#endif
       .setup = afterTinyRun("spirv",
                             [](std::vector<std::byte> bytes) {
                               std::vector<std::uint32_t> words(bytes.size() / 4);
                               std::memcpy(words.data(), bytes.data(), words.size() * 4);
                               const auto changed = withForeignImport(std::move(words));
                               const auto out = std::as_bytes(std::span(changed));
                               return std::vector<std::byte>(out.begin(), out.end());
                             }),
       .exitCode = 0,
       .fragment = "failed (VK_ERROR_UNKNOWN",
       .note = "the driver's refusal evicts the entry (and the pipeline cache it seeded); rebuilt once from "
               "source, the run passes and the next run is clean",
       .check = passedTwice},
      {.id = "CachePipelineOfAnotherDevice",
       .area = "cache",
       .input = "a whole, checksummed pipeline cache whose header names another device (vendor id changed)",
       .args = runTinyPrompt(),
       .env = kCacheEnv,
       .setup = afterTinyRun("pipeline",
                             [](std::vector<std::byte> bytes) {
                               bytes.at(8) ^= std::byte{0xff};  // VkPipelineCacheHeaderVersionOne::vendorID
                               return bytes;
                             }),
       .exitCode = 0,
       .fragment = "holds a pipeline cache whose header does not match device",
       .note = "never handed to the driver; evicted, the run builds its pipelines and stores a new one",
       .check = passedTwice},

      // ---- What a user wrote, quoted back.
      {.id = "ConfigKeyOfTwoMegabytes",
       .area = "config",
       .input = "a key of 2 MiB",
       .args = {"run", "{tmp}/model.json"},
       .setup = tinyWithKey(std::string(2 << 20, 'k')),
       .exitCode = 2,
       .fragment = "/attention/" + std::string(69, 'k') + "... (2097163 bytes): unknown key \"" + std::string(80, 'k') +
                   "... (2097152 bytes)\"",
       .note = "the key is cut after 80 characters, with its size",
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         return o.err.size() < 2000 ? "" : fmt::format("stderr holds {} bytes", o.err.size());
       }},
      {.id = "ConfigKeyWithControlCharacters",
       .area = "config",
       .input = "a key holding an escape sequence, a bell and a NUL",
       .args = {"run", "{tmp}/model.json"},
       .setup = tinyWithKey(std::string("n_\x1b[31mhead\x07\0x", 14)),
       .exitCode = 2,
       .fragment = "/attention/n_\\x1b[31mhead\\x07\\x00x: unknown key \"n_\\x1b[31mhead\\x07\\x00x\"",
       .note = "every byte outside printable ASCII escaped",
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         const bool raw = std::any_of(o.err.begin(), o.err.end(),
                                      [](char c) { return c != '\n' && static_cast<unsigned char>(c) < 0x20; });
         return raw ? "a control character reached stderr" : "";
       }},
      {.id = "KnobValueWithControlCharacters",
       .area = "knobs",
       .input = "a knob value holding a carriage return",
       .args = {"knobs"},
       .env = {{"FOUNDRY_FA_DECODE_WARPS", "4\rfoundry: all good"}},
       .exitCode = 2,
       .fragment = "invalid value '4\\rfoundry: all good'",
       .note = "escaped: the line cannot be overwritten"},

      // ---- A run that fails after it has recorded work.
      {.id = "FailingRunPrintsOneLine",
       .area = "command line",
       .input = "a run that fails once its prefill is recorded (a decode snippet that does not compile)",
       .args = runTinyPrompt(),
       .env = {{"FOUNDRY_KERNEL_DIR", "{tmp}/kernels"}},
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             fs::copy(ctx.source / "kernels", ctx.tmp / "kernels", fs::copy_options::recursive);
             std::ofstream(ctx.tmp / "kernels" / "flashattention" / "decode_subgroup.glsl", std::ios::app) << "}}}\n";
           },
       .exitCode = 4,
       .fragment = "compiling kernel HeadLayout_KvAccess_Rope_FlashDecodeFused",
       .note = "the error (with its quoted lines) and nothing else: no warning about the work left unsubmitted",
       .multiLine = true,
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         const std::string line = lineWith(o.err, "[foundry ");
         return line.empty() ? "" : "a log line beside the error: " + line;
       }},
  };
  for (const auto& knob : knobTable()) rows.push_back(knobRow(knob));
  return rows;
}

}  // namespace foundry::errors
