// Rows for `foundry run <config>`: wrong model configs, wrong flags, wrong --inputs / --expect files,
// outputs that do not match, and output paths that cannot be written. Each row is run by
// ErrorSuiteTest.cpp exactly like the rows in CliRows.cpp and lands in docs/reliability.md (rebuild
// and run `foundry_error_table`, then paste its output over the table there).
//
// Config and --inputs rows fail before any attention work (a few tens of milliseconds); the rows that
// must run first (--expect, --save, --json) use `--prompt-len 1 --decode-tokens 2 --layers 1` of
// TinyLlama, which compiles no prefill kernel and takes about a second on lavapipe.
#include <sys/stat.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/runner/io/Safetensors.h"

namespace foundry::errors {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// Setup that makes a FIFO {tmp}/NAME (nothing ever writes to it).
std::function<void(const CliContext&)> makeFifo(std::string name) {
  return [name](const CliContext& ctx) {
    if (::mkfifo((ctx.tmp / name).c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
  };
}

// ---- Model configs: {tmp}/model.json, read by `foundry run` before anything touches the device.

const std::vector<std::string> kRunModel = {"run", "{tmp}/model.json"};

/// A row that runs `foundry run {tmp}/model.json` on a file holding `text`.
CliRow configRow(std::string id, std::string input, std::string text, int exitCode, std::string fragment) {
  return {.id = std::move(id),
          .area = "config",
          .input = std::move(input),
          .args = kRunModel,
          .setup = [text](const CliContext& ctx) { writeBytes(ctx.tmp / "model.json", text); },
          .exitCode = exitCode,
          .fragment = std::move(fragment)};
}
/// The base config with `pointer` set to `value`.
CliRow configWith(std::string id, std::string input, const std::vector<std::pair<std::string, json>>& values,
                  int exitCode, std::string fragment) {
  json c = baseConfig();
  for (const auto& [pointer, value] : values) c[json::json_pointer(pointer)] = value;
  return configRow(std::move(id), std::move(input), c.dump(2), exitCode, std::move(fragment));
}
CliRow configWith(std::string id, std::string input, const std::string& pointer, json value, int exitCode,
                  std::string fragment) {
  return configWith(std::move(id), std::move(input), {{pointer, std::move(value)}}, exitCode, std::move(fragment));
}

// ---- Damaged safetensors files given to --inputs (the same recipes as InProcessRows.cpp's).

/// `foundry run tinyllama --inputs {tmp}/inputs.safetensors` on a file holding `bytes`.
CliRow inputsRow(std::string id, std::string input, std::string bytes, int exitCode, std::string fragment) {
  return {.id = std::move(id),
          .area = "safetensors",
          .input = std::move(input),
          .args = runTiny({"--inputs", "{tmp}/inputs.safetensors"}),
          .setup =
              [bytes](const CliContext& ctx) {
                copyTiny(ctx);
                writeBytes(ctx.tmp / "inputs.safetensors", bytes);
              },
          .exitCode = exitCode,
          .fragment = std::move(fragment)};
}

const std::string kInputsFile = " (in {tmp}/inputs.safetensors)";

}  // namespace

std::vector<CliRow> runCommandRows() {
  std::vector<CliRow> rows = {
      // ---- Model configs.
      {.id = "RunConfigMissing",
       .area = "config",
       .input = "a file that does not exist",
       .args = {"run", "{tmp}/missing.json"},
       .exitCode = 2,
       .fragment = "cannot read config {tmp}/missing.json: No such file or directory"},
      {.id = "RunConfigIsADirectory",
       .area = "config",
       .input = "a directory",
       .args = {"run", "{tmp}"},
       .exitCode = 2,
       .fragment = "cannot read config {tmp}: it is a directory"},
      configRow("RunConfigMalformed", "malformed JSON", "{\n  \"name\": ,\n}", 2,
                "malformed JSON at line 2, column 11: syntax error while parsing value"),
      configRow("RunConfigTruncated", "truncated JSON", baseConfig().dump(2).substr(0, 60), 2,
                "malformed JSON at line"),
      configRow("RunConfigEmpty", "an empty file", "", 2, "malformed JSON at line 1, column 1"),
      {.id = "RunConfigFifoWithoutWriter",
       .area = "config",
       .input = "a FIFO that nothing writes to",
       .args = kRunModel,
       .setup = makeFifo("model.json"),
       .exitCode = 2,
       .fragment = "malformed JSON at line 1, column 1",
       .note = "read as empty: the open does not wait for a writer",
       .timeoutSeconds = 60},
      configRow("RunConfigDuplicateKey", "a key given twice", R"({"name": "a", "name": "b"})", 2,
                "/name: duplicate key \"name\""),
      configWith("RunConfigWrongType", "a number given as a string", "/attention/n_heads", "32", 2,
                 "/attention/n_heads: expected an integer from 1 to 1024, found \"32\" (a string) (in "
                 "{tmp}/model.json)"),
      configWith("RunConfigUnknownKey", "an unknown key", "/attention/n_head", 32, 2,
                 "/attention/n_head: unknown key \"n_head\"; accepted: layers, n_heads"),
      configWith("RunConfigTwoToThe40Heads", "2^40 heads", "/attention/n_heads", 1ll << 40, 2,
                 "/attention/n_heads: expected an integer from 1 to 1024, found 1099511627776"),
      configWith("RunConfigNegativeHeadDim", "a negative head_dim", "/attention/head_dim", -64, 2,
                 "/attention/head_dim: expected an integer from 1 to 1024, found -64"),
      configWith("RunConfigZeroLayers", "zero layers", "/attention/layers", 0, 2,
                 "/attention/layers: expected an integer from 1 to 1024, found 0"),
      configWith("RunConfigHeadsNotAMultiple", "n_heads not divisible by n_kv_heads", "/attention/n_kv_heads", 5, 2,
                 "/attention/n_kv_heads: n_heads (32) must be a multiple of n_kv_heads (5)"),
      configWith("RunConfigBeyondMaxContext", "prompt + decode tokens beyond max_context", "/run/prompt_len", 4090, 2,
                 "/run/decode_tokens: prompt_len + decode_tokens = 4090 + 8 = 4098 exceeds max_context (4096)"),
      {.id = "RunConfigBeyondMaxContextBroughtBackByFlags",
       .area = "config",
       .input = "prompt + decode tokens beyond max_context in the file, brought within it by `--prompt-len` and "
                "`--decode-tokens`",
       .args = {"run", "{tmp}/model.json", "--prompt-len", "1", "--decode-tokens", "2", "--layers", "1", "--no-check"},
       .setup =
           [](const CliContext& ctx) {
             json c = baseConfig();
             c["run"]["prompt_len"] = 4090;
             writeBytes(ctx.tmp / "model.json", c.dump(2));
           },
       .exitCode = 0,
       .fragment = "batch 1, prompt 1, 2 decode tokens",
       .note = "runs: the rules between fields hold for the run as the flags leave it",
       .quiet = true},
      configWith("RunConfigOddHeadDimWithRope", "an odd head_dim with RoPE and no rotary_dims", "/attention/head_dim",
                 63, 2, "/attention/head_dim: RoPE rotates pairs of dimensions, so it needs an even count: head_dim"),
      configWith("RunConfigQ8RowsNotWholeBlocks", "q8_0 caches for rows of 80 (q8_0 rows are whole blocks of 32)",
                 {{"/attention/head_dim", 80}, {"/run/kv_dtype", "q8_0"}}, 2,
                 "/run/kv_dtype: q8_0 rows are whole blocks of 32 values, but this model's rows hold 80"),
      configWith("RunConfigHeadDimRowsMisaligned", "a head_dim whose token rows miss the device's storage alignment",
                 {{"/attention/head_dim", 62}, {"/attention/n_kv_heads", 1}}, 3,
                 "/attention/head_dim: 62 with 1 KV heads of f16 at batch 1: a token's K/V rows take 124 bytes"),
      configWith("RunConfigHeadDim1024F32", "an f32 head_dim whose prefill tiles do not fit the device",
                 {{"/attention/head_dim", 1024}, {"/run/dtype", "f32"}}, 3,
                 "no prefill tile for head_dim 1024 with f32 tiles fits device"),
      configWith("RunConfigTuningInvalid", "an invalid knob value in `tuning`", "/tuning/fa_decode_warps", 3, 2,
                 "/tuning/fa_decode_warps: invalid value '3'; accepted: auto, 1, 2, 4, 8, 16"),
      configWith("RunConfigTuningUnknownKnob", "a misspelt knob in `tuning`", "/tuning/fa_decode_wraps", 4, 2,
                 "/tuning/fa_decode_wraps: unknown tuning key; accepted: disable_fa"),
      configRow("RunConfigOver16MiB", "a file over 16 MiB", baseConfig().dump() + std::string(kMaxConfigBytes, ' '), 2,
                "config {tmp}/model.json is larger than the limit of 16777216 bytes"),

      // ---- The command line of `foundry run`: each override is checked against the config.
      {.id = "RunNoConfig",
       .area = "command line",
       .input = "`foundry run` without a config",
       .args = {"run"},
       .exitCode = 2,
       .fragment = "config is required"},
      {.id = "RunBatchZero",
       .area = "command line",
       .input = "a batch of zero",
       .args = runTiny({"--batch", "0"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--batch: expected an integer from 1 to 1024, found 0"},
      {.id = "RunDTypeUnknown",
       .area = "command line",
       .input = "an unknown dtype",
       .args = runTiny({"--dtype", "f8"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--dtype: expected \"f16\", \"bf16\" or \"f32\", found \"f8\""},
      {.id = "RunPromptBeyondMaxContext",
       .area = "command line",
       .input = "a prompt longer than max_context",
       .args = {"run", kTiny, "--prompt-len", "4096"},
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--prompt-len: prompt_len (4096) exceeds max_context (2048) of TinyLlama-1.1B"},
      {.id = "RunPromptPlusDecodeBeyondMaxContext",
       .area = "command line",
       .input = "prompt + decode tokens beyond max_context",
       .args = {"run", kTiny, "--prompt-len", "2047"},
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--prompt-len: prompt_len + decode_tokens = 2047 + 8 = 2055 exceeds max_context (2048)"},
      {.id = "RunLayersBeyondModel",
       .area = "command line",
       .input = "more layers than the model has",
       .args = {"run", kTiny, "--layers", "23"},
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--layers: cannot run 23 layers of TinyLlama-1.1B, which has 22"},
      {.id = "RunReplayForcedWithRaggedPrompts",
       .area = "command line",
       .input = "`FOUNDRY_DECODE_REPLAY=1` with `--prompt-lens` (every token must be recorded)",
       .args = runTiny({"--prompt-lens", "1"}),
       .env = {{"FOUNDRY_DECODE_REPLAY", "1"}},
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "FOUNDRY_DECODE_REPLAY: 1 cannot be used here: prompts of their own lengths (run.prompt_lens)"},
      {.id = "RunPathUnknown",
       .area = "command line",
       .input = "an unknown attention path",
       .args = runTiny({"--path", "bogus"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--path: 'bogus'; accepted: flash, reference"},
      {.id = "RunToleranceNegative",
       .area = "command line",
       .input = "a negative tolerance",
       .args = runTiny({"--tolerance", "-1"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--tolerance: '-1'; accepted: a relative error from 0 to below 1 (0: the dtype's bound)"},
      {.id = "RunToleranceInfinite",
       .area = "command line",
       .input = "an infinite tolerance (every mismatch would pass)",
       .args = runTiny({"--tolerance", "inf"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--tolerance: 'inf'; accepted: a relative error from 0 to below 1"},
      {.id = "RunToleranceOne",
       .area = "command line",
       .input = "a tolerance of 1 (outputs of all zeros would pass)",
       .args = runTiny({"--tolerance", "1"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--tolerance: '1'; accepted: a relative error from 0 to below 1"},
      {.id = "RunCheckAndNoCheck",
       .area = "command line",
       .input = "`--check` and `--no-check` together",
       .args = runTiny({"--check", "--no-check"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--no-check: given with --check; give one of them"},
      {.id = "RunSetUnknownKnob",
       .area = "knobs",
       .input = "a misspelt knob on the command line of a run",
       .args = runTiny({"--set", "FA_DECODE_WRAPS=4"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_DECODE_WRAPS (--set): unknown knob; accepted: FOUNDRY_DISABLE_FA"},

      // ---- --inputs: q, k, v as [layers, batch, tokens, heads, head_dim], read before any work.
      {.id = "RunInputsMissing",
       .area = "safetensors",
       .input = "a file that does not exist",
       .args = runTiny({"--inputs", "{tmp}/missing.safetensors"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "cannot read: No such file or directory (in {tmp}/missing.safetensors)"},
      {.id = "RunInputsFifo",
       .area = "safetensors",
       .input = "a FIFO that nothing writes to",
       .args = runTiny({"--inputs", "{tmp}/fifo"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             makeFifo("fifo")(ctx);
           },
       .exitCode = 2,
       .fragment = "cannot read: it is a FIFO; a safetensors file is read in place, so it must be a regular file",
       .note = "without waiting for a writer",
       .timeoutSeconds = 60},
      {.id = "RunExpectCharacterDevice",
       .area = "safetensors",
       .input = "`--expect /dev/zero`",
       .args = runTiny({"--expect", "/dev/zero"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "cannot read: it is a device; a safetensors file is read in place"},
      inputsRow("RunInputsEmpty", "an empty file", "", 2,
                "file is 0 bytes; a safetensors file starts with an 8-byte header length" + kInputsFile),
      inputsRow("RunInputsTruncated", "a truncated file (data cut short)", safetensors(entry("F32", "[2]", "[0,8]"), 5),
                2,
                "/a/data_offsets: tensor \"a\": offsets [0, 8) run past the end of the data (5 bytes)" + kInputsFile),
      inputsRow("RunInputsHeaderPastEnd", "header length past the end of the file", le64(1000) + std::string(12, '{'),
                2, "header length 1000 runs past the end of the file (20 bytes)" + kInputsFile),
      inputsRow("RunInputsHeaderOver100MB", "a header over 100 MB", le64(100'000'001) + "{}", 2,
                "header length 100000001 exceeds the limit of 100000000 bytes" + kInputsFile),
      inputsRow("RunInputsHeaderNotJson", "a header that is not JSON", safetensors("{]", 0), 2,
                "header is not valid JSON: malformed JSON at line 1, column 2"),
      inputsRow("RunInputsOverlap", "overlapping offsets",
                safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            12),
                2, "/b/data_offsets: tensor \"b\" [4, 12) overlaps tensor \"a\" [0, 8)" + kInputsFile),
      inputsRow("RunInputsOffsetsOutOfRange", "offsets beyond the data",
                safetensors(entry("F32", "[274877906944]", "[0,1099511627776]"), 8), 2,
                "/a/data_offsets: tensor \"a\": offsets [0, 1099511627776) run past the end of the data (8 bytes)" +
                    kInputsFile),
      inputsRow("RunInputsBeginAfterEnd", "begin after end", safetensors(entry("F32", "[2]", "[8,0]"), 8), 2,
                "/a/data_offsets: tensor \"a\": begin 8 is after end 0" + kInputsFile),
      inputsRow("RunInputsDTypeMismatch", "byte count that does not fit the dtype",
                safetensors(entry("F16", "[2]", "[0,8]"), 8), 2,
                "/a/data_offsets: tensor \"a\": holds 8 bytes but shape [2] of F16 needs 4" + kInputsFile),
      inputsRow("RunInputsShapeMismatch", "byte count that does not fit the shape",
                safetensors(entry("F32", "[3]", "[0,8]"), 8), 2,
                "/a/data_offsets: tensor \"a\": holds 8 bytes but shape [3] of F32 needs 12" + kInputsFile),
      inputsRow("RunInputsNegativeDim", "a negative dimension", safetensors(entry("F32", "[1,-2]", "[0,8]"), 8), 2,
                "/a/shape/1: expected a dimension from 0 to 2^63-1, found -2" + kInputsFile),
      inputsRow(
          "RunInputsShapeOverflow", "a shape whose size overflows 64 bits",
          safetensors(entry("F32", "[4294967296,4294967296,2]", "[0,8]"), 8), 2,
          "/a/shape: tensor \"a\": shape [4294967296, 4294967296, 2] has more bytes than fit in 64 bits" + kInputsFile),
      inputsRow("RunInputsUnsupportedDType", "a dtype Foundry does not read",
                safetensors(entry("F64", "[1]", "[0,8]"), 8), 3,
                "/a/dtype: dtype F64 is not supported; supported: F16, F32, BF16" + kInputsFile),
      inputsRow("RunInputsTrailingBytes", "bytes that belong to no tensor",
                safetensors(entry("F32", "[1]", "[0,4]"), 8), 2,
                "bytes [4, 8) at the end of the data belong to no tensor" + kInputsFile),
      {.id = "RunInputsTensorMissing",
       .area = "safetensors",
       .input = "`--inputs` without tensor `v`",
       .args = runTiny({"--inputs", "{tmp}/inputs.safetensors"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeTensors(ctx.tmp / "inputs.safetensors", {{"q", kQShape}, {"k", kKvShape}});
           },
       .exitCode = 2,
       .fragment = "--inputs: no tensor \"v\"; the file holds: \"k\", \"q\" (in {tmp}/inputs.safetensors)"},
      {.id = "RunInputsWrongShape",
       .area = "safetensors",
       .input = "`--inputs` whose k has the wrong number of heads",
       .args = runTiny({"--inputs", "{tmp}/inputs.safetensors"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeTensors(ctx.tmp / "inputs.safetensors", {{"q", kQShape}, {"k", {1, 1, 3, 8, 64}}, {"v", kKvShape}});
           },
       .exitCode = 2,
       .fragment = "--inputs: tensor 'k' in {tmp}/inputs.safetensors has shape [1, 1, 3, 8, 64]; this run needs "
                   "[1, 1, 3, 4, 64] (layers, batch, tokens, heads, head_dim)"},

      // ---- --expect: tensor o as [layers, batch, tokens, heads, head_dim], read and checked before any work,
      // compared after the run.
      {.id = "RunExpectMissing",
       .area = "expected outputs",
       .input = "`--expect` naming no file",
       .args = runTiny({"--expect", "{tmp}/missing.safetensors"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "cannot read: No such file or directory (in {tmp}/missing.safetensors)",
       .note = "before the run"},
      {.id = "RunExpectTensorMissing",
       .area = "expected outputs",
       .input = "`--expect` without tensor `o`",
       .args = runTiny({"--expect", "{tmp}/expected.safetensors"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeTensors(ctx.tmp / "expected.safetensors", {{"out", kQShape}});
           },
       .exitCode = 2,
       .fragment = "--expect: no tensor \"o\"; the file holds: \"out\" (in {tmp}/expected.safetensors)"},
      {.id = "RunExpectWrongShape",
       .area = "expected outputs",
       .input = "`--expect` of a run with another decode length",
       .args = runTiny({"--expect", "{tmp}/expected.safetensors"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeTensors(ctx.tmp / "expected.safetensors", {{"o", {1, 1, 4, 32, 64}}});
           },
       .exitCode = 2,
       .fragment = "--expect: tensor 'o' in {tmp}/expected.safetensors has shape [1, 1, 4, 32, 64]; this run "
                   "produces [1, 1, 3, 32, 64] (layers, batch, tokens, heads, head_dim)"},
      {.id = "RunExpectMismatch",
       .area = "expected outputs",
       .input = "`--expect` of a saved run with one output changed by 0.25",
       .args = runTiny({"--expect", "{tmp}/expected.safetensors", "--json", "{tmp}/report.json"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             ctx.foundry(runTiny({"--save", "{tmp}/expected.safetensors"}), {});
             const auto saved = readSafetensors(ctx.tmp / "expected.safetensors");
             std::vector<float> o = saved.floats("o");
             o[o.size() / 2] += 0.25f;
             const std::vector<NamedTensor> perturbed = {{"o", saved.tensor("o").shape, o}};
             writeSafetensors(ctx.tmp / "expected.safetensors", perturbed, DType::F16);
           },
       .exitCode = 1,
       .fragment = "foundry: check failed: the outputs do not match --expect",
       .note = "the report says `MISMATCH`; `--json` is still written",
       .check = [](const CliContext& ctx, const CliOutcome& o) -> std::string {
         if (o.out.find("expected outputs: MISMATCH") == std::string::npos) return "no MISMATCH line in the report";
         const json report = json::parse(readText(ctx.tmp / "report.json"));
         if (report.at("expect").at("passed") != false || report.at("passed") != false) {
           return "report.json does not say the run failed: " + report.dump();
         }
         return "";
       }},
      {.id = "RunSaveThenExpect",
       .area = "expected outputs",
       .input = "`--expect` of the file `--save` wrote, same arguments",
       .args = runTiny({"--expect", "{tmp}/expected.safetensors"}, kWithPrefill),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             ctx.foundry(runTiny({"--save", "{tmp}/expected.safetensors"}, kWithPrefill), {});
           },
       .exitCode = 0,
       .fragment = "expected outputs: matched (max relative error 0.00e+00)",
       .quiet = true,
       .check = leavesOnly({"tinyllama.json", "expected.safetensors"})},

      {.id = "RunSaveOverExpect",
       .area = "expected outputs",
       .input = "`--save` naming the `--expect` file",
       .args = runTiny({"--save", "{tmp}/expected.safetensors", "--expect", "{tmp}/expected.safetensors"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             ctx.foundry(runTiny({"--save", "{tmp}/expected.safetensors"}), {});
           },
       .exitCode = 2,
       .fragment = "--save: {tmp}/expected.safetensors is also the --expect file",
       .note = "the golden file is left as it was",
       .check = leavesOnly({"tinyllama.json", "expected.safetensors"})},

      // ---- Output files of a run: checked before the run, written whole or not at all.
      {.id = "RunJsonMissingDirectory",
       .area = "files",
       .input = "`run --json` into a missing directory",
       .args = runTiny({"--json", "{tmp}/missing/report.json"}),
       .setup = copyTiny,
       .exitCode = 4,
       .fragment = "cannot write {tmp}/missing/report.json: No such file or directory",
       .note = "before the run; nothing is written",
       .check = leavesOnly({"tinyllama.json"})},
      {.id = "RunSaveOverADirectory",
       .area = "files",
       .input = "`run --save` onto a directory",
       .args = runTiny({"--save", "{tmp}/outputs", "--json", "{tmp}/report.json"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             fs::create_directories(ctx.tmp / "outputs");
           },
       .exitCode = 2,
       .fragment = "--save: cannot write {tmp}/outputs: it is a directory",
       .note = "before the run; nothing is written, `--json` neither",
       .check = leavesOnly({"tinyllama.json", "outputs"})},

      // ---- Device memory and the cache during a run.
      {.id = "RunKvCacheBeyondDeviceMemory",
       .area = "device",
       .input = "a config whose KV cache cannot be allocated (32 GiB per layer)",
       .args = {"run", "{tmp}/model.json"},
       .setup =
           [](const CliContext& ctx) {
             json c = baseConfig();
             c["attention"]["layers"] = 1;
             c["attention"]["n_heads"] = 8;
             c["attention"]["max_context"] = 1 << 24;
             c["run"]["prompt_len"] = (1 << 24) - 1;
             c["run"]["decode_tokens"] = 1;
             writeBytes(ctx.tmp / "model.json", c.dump(2));
           },
       .exitCode = 4,
       .fragment = "allocating 34359738368 bytes (32.00 GiB) for 'k_cache0' exceeds the device's largest allocation"},
      {.id = "RunCacheDirUnwritable",
       .area = "cache",
       .input = "an unwritable cache directory during a run",
       .args = runTiny({}),
       .env = {{"FOUNDRY_CACHE_DIR", "{tmp}/not-a-dir/cache"}},
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeBytes(ctx.tmp / "not-a-dir", "a file\n");
           },
       .exitCode = 0,
       .fragment = "kernel cache disabled, continuing uncached: cannot create {tmp}/not-a-dir/cache",
       .note = "the run continues uncached, with one warning",
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         return o.out.find("kernel cache: 5 compiled, 0 from disk") == std::string::npos
                    ? "expected every kernel compiled in:\n" + o.out
                    : "";
       }},
  };
  return rows;
}

}  // namespace foundry::errors
