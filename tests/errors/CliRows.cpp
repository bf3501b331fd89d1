// Rows that run the `foundry` executable: wrong flags, knobs, environments, kernel directories,
// output paths and cache directories. Each says what a user typed and what they must get back.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"

namespace foundry::errors {

namespace {

namespace fs = std::filesystem;

/// The "kernel cache: N compiled, ..." line `foundry kernels --compile` ends with.
std::string cacheLine(const std::string& out) {
  return lineWith(out, "kernel cache: ");
}

/// A command line refused as a user error (exit 2).
CliRow flagRow(std::string id, std::string input, std::vector<std::string> args, std::string fragment) {
  return {.id = std::move(id),
          .area = "command line",
          .input = std::move(input),
          .args = std::move(args),
          .exitCode = 2,
          .fragment = std::move(fragment)};
}

/// A row whose arguments give one flag (the one `fragment` starts with) an empty value: refused as the
/// command line is read.
CliRow emptyValue(std::string id, std::vector<std::string> args, std::string fragment) {
  std::string input = fmt::format("an empty value for `{}`", fragment.substr(0, fragment.find(':')));
  return flagRow(std::move(id), std::move(input), std::move(args), std::move(fragment));
}

/// `foundry bench --shape <shape>`: refused before the device is measured; `fragment` follows the quoted shape.
CliRow benchShape(std::string id, std::string input, const std::string& shape, std::string fragment) {
  return flagRow(std::move(id), std::move(input), {"bench", "--shape", shape}, "--shape: '" + shape + "'" + fragment);
}

/// Fills {tmp}/cache with every lavapipe kernel, then damages the first entry with `damage`.
std::function<void(const CliContext&)> damagedCache(std::function<void(const fs::path&)> damage) {
  return [damage](const CliContext& ctx) { damage(firstCacheEntry(ctx)); };
}

}  // namespace

std::vector<CliRow> cliRows() {
  std::vector<CliRow> rows = {
      // ---- The command line.
      {.id = "UnknownSubcommand",
       .area = "command line",
       .input = "an unknown subcommand",
       .args = {"frobnicate"},
       .exitCode = 2,
       .fragment = "unknown subcommand 'frobnicate'; accepted: devices"},
      flagRow("UnknownOptionNoSubcommand", "an unknown option and no subcommand", {"-v"},
              "unknown option '-v'; a subcommand is required; accepted: devices"),
      {.id = "NoSubcommand",
       .area = "command line",
       .input = "no subcommand",
       .args = {"--log-level", "warn"},
       .exitCode = 2,
       .fragment = "a subcommand is required; accepted: devices"},
      {.id = "UnknownFlag",
       .area = "command line",
       .input = "an unknown flag",
       .args = {"kernels", "--bogus"},
       .exitCode = 2,
       .fragment = "The following argument was not expected: --bogus"},
      {.id = "FlagWithoutValue",
       .area = "command line",
       .input = "a flag without its value",
       .args = {"kernels", "--heads"},
       .exitCode = 2,
       .fragment = "--heads: 1 required INT missing"},
      {.id = "FlagNotANumber",
       .area = "command line",
       .input = "a count that is not a number",
       .args = {"kernels", "--pretend", "h200", "--heads", "many"},
       .exitCode = 2,
       .fragment = "Could not convert: --heads = many"},
      flagRow("TwoToThe40Heads", "2^40 heads", {"kernels", "--pretend", "h200", "--heads", "1099511627776"},
              "--heads: expected an integer from 1 to 1024, found 1099511627776"),
      flagRow("NegativeHeadDim", "a negative head_dim", {"kernels", "--pretend", "h200", "--head-dim", "-64"},
              "--head-dim: expected an integer from 1 to 1024, found -64"),
      flagRow("ZeroHeads", "zero heads", {"kernels", "--pretend", "h200", "--heads", "0"},
              "--heads: expected an integer from 1 to 1024, found 0"),
      flagRow("ZeroKvHeads", "zero KV heads", {"kernels", "--pretend", "h200", "--kv-heads", "0"},
              "--kv-heads: expected an integer from 1 to 1024, found 0"),
      flagRow("ZeroHeadDim", "a head_dim of zero", {"kernels", "--pretend", "h200", "--head-dim", "0"},
              "--head-dim: expected an integer from 1 to 1024, found 0"),
      flagRow("HeadsAboveTheSchema", "more heads than a config's n_heads may have",
              {"kernels", "--pretend", "h200", "--heads", "1025", "--kv-heads", "1"},
              "--heads: expected an integer from 1 to 1024, found 1025"),
      flagRow("HeadsNotAMultipleOfKvHeads", "n_heads not divisible by n_kv_heads",
              {"kernels", "--pretend", "h200", "--heads", "32", "--kv-heads", "5"},
              "--kv-heads: --heads (32) must be a multiple of --kv-heads (5): each KV head serves a whole group"),
      {.id = "HeadDim1024F32",
       .area = "command line",
       .input = "an f32 head_dim whose prefill tiles do not fit the device",
       .args = {"kernels", "--pretend", "lavapipe", "--head-dim", "1024", "--dtype", "f32"},
       .exitCode = 3,
       .fragment = "no prefill tile for head_dim 1024 with f32 tiles fits device"},
      {.id = "DTypeBf16Without16BitStorage",
       .area = "command line",
       .input = "a dtype the device cannot read",
       .args = {"kernels", "--pretend", "lavapipe,storage16=0", "--dtype", "bf16"},
       .exitCode = 3,
       .fragment = "bf16 tensors: device 'llvmpipe"},
      {.id = "DTypeUnknown",
       .area = "command line",
       .input = "an unknown dtype",
       .args = {"kernels", "--pretend", "h200", "--dtype", "f8"},
       .exitCode = 2,
       .fragment = "--dtype: expected \"f16\", \"bf16\" or \"f32\", found \"f8\""},
      flagRow("DTypeInt8", "a quantized dtype for q, k, v and o alike",
              {"kernels", "--pretend", "h200", "--dtype", "int8"},
              "--dtype: expected \"f16\", \"bf16\" or \"f32\", found \"int8\""),
      flagRow("DTypeQ8_0", "q8_0 for q, k, v and o alike", {"kernels", "--pretend", "h200", "--dtype", "q8_0"},
              "--dtype: expected \"f16\", \"bf16\" or \"f32\", found \"q8_0\""),
      flagRow("KvDTypeUnknown", "an unknown KV cache storage", {"kernels", "--pretend", "h200", "--kv-dtype", "q4"},
              "--kv-dtype: expected \"f16\", \"bf16\", \"f32\", \"int8\" or \"q8_0\", found \"q4\""),
      flagRow("KvDTypeQ8RowsNotWholeBlocks", "q8_0 caches for rows of 80 (q8_0 rows are whole blocks of 32)",
              {"kernels", "--pretend", "h200", "--head-dim", "80", "--kv-dtype", "q8_0"},
              "--kv-dtype: q8_0 rows are whole blocks of 32 values, but this model's rows hold 80"),
      flagRow("PageSizeCuttingInt8Blocks", "int8 caches in pages that cut their blocks of 32 keys",
              {"kernels", "--pretend", "h200", "--kv-dtype", "int8", "--page-size", "48"},
              "--page-size: pages of 48 rows would cut int8 blocks of 32 keys; accepted: a page size that is a "
              "multiple of 32"),
      flagRow("PageSizeBeyondRange", "a page size beyond the config's range",
              {"kernels", "--pretend", "h200", "--page-size", "5000"},
              "--page-size: expected an integer from 0 to 4096, found 5000"),
      {.id = "ConfigPageSizeCuttingInt8Blocks",
       .area = "command line",
       .input = "`--kv-dtype int8 --page-size 48` with a config: checked as `foundry run` checks them",
       .args = {"kernels", "--pretend", "h200", "--config", kTiny, "--kv-dtype", "int8", "--page-size", "48"},
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--page-size: pages of 48 rows would cut int8 blocks of 32 keys"},
      {.id = "KernelsOfAPagedInt8Cache",
       .area = "command line",
       .input = "`foundry kernels --kv-dtype int8 --page-size 32`",
       .args = {"kernels", "--pretend", "lavapipe", "--kv-dtype", "int8", "--page-size", "32"},
       .exitCode = 0,
       .fragment = "KvAccess_KvQuantAppend__int8v1_w1_store_pg32",
       .note = "lists the kernels of int8 caches in pages of 32",
       .quiet = true},
      {.id = "UnknownDevicePreset",
       .area = "command line",
       .input = "an unknown device preset",
       .args = {"kernels", "--pretend", "gtx9000"},
       .exitCode = 2,
       .fragment = "unknown preset 'gtx9000'; accepted: h200"},
      {.id = "DeviceStringBadValue",
       .area = "command line",
       .input = "a device string with a vendor that is not one",
       .args = {"kernels", "--pretend", "custom,name=\"x, y\",vendor=nvidea"},
       .exitCode = 2,
       .fragment = "vendor='nvidea' is not accepted; accepted: nvidia, amd"},
      {.id = "DeviceStringUnknownKey",
       .area = "command line",
       .input = "a device string with an unknown key",
       .args = {"kernels", "--pretend", "h200,warps=4"},
       .exitCode = 2,
       .fragment = "unknown key 'warps'; accepted: name, vendor"},
      flagRow("DeviceStringNoInvocations", "a device string whose workgroups hold no invocation",
              {"kernels", "--pretend", "lavapipe,invocations=0"},
              "invocations='0' is not accepted; accepted: at least 128 (Vulkan's least "
              "maxComputeWorkGroupInvocations)"),
      flagRow("DeviceStringNoSharedMemory", "a device string without shared memory",
              {"kernels", "--pretend", "lavapipe,shared=0"}, "shared='0' is not accepted; accepted: at least 16384"),
      {.id = "BenchZeroRuns",
       .area = "command line",
       .input = "zero timed runs",
       .args = {"bench", "--runs", "0"},
       .exitCode = 2,
       .fragment = "--runs: must be at least 1"},
      {.id = "BenchReadScanMalformed",
       .area = "command line",
       .input = "a read-stream geometry without its loads",
       .args = {"bench", "--read-scan", "128:128:256"},
       .exitCode = 2,
       .fragment =
           "--read-scan: '128:128:256'; accepted: MIB:GROUPS:WORKGROUP:LOADS[:blocked[:SPLIT:SIDES]|:ring|:cm2]"},

      benchShape("BenchShapeTwoFormats", "a bench shape with two cache formats", "decode:1:4:2:300:64+int8+q8_0",
                 ": +int8 and +q8_0 both set the cache's format; accepted: one modifier of a kind"),
      benchShape("BenchShapeTwoPageSizes", "a bench shape with two page sizes", "decode:1:4:2:300:64+pg16+pg32",
                 ": +pg16 and +pg32 both set the page size"),
      benchShape("BenchShapeTwoWindows", "a bench shape with two windows", "decode:1:4:2:300:64+window16+window8",
                 ": +window16 and +window8 both set the window"),
      benchShape("BenchShapeHeadsNotAMultiple", "a bench shape whose Hq is not a multiple of Hkv",
                 "decode:1:4:3:300:64", ": Hq (4) must be a multiple of Hkv (3)"),
      benchShape("BenchShapeInt8PagesCutBlocks", "a bench shape whose pages cut int8 blocks",
                 "decode:1:4:2:300:64+int8+pg16",
                 ": pages of 16 rows would cut int8 blocks of 32 keys; accepted: a page size that is a multiple of 32"),
      benchShape("BenchShapeMalformed", "a bench shape without its head_dim", "decode:1:4:2:300",
                 "; accepted: decode:B:Hq:Hkv:kv:D or prefill:B:Hq:Hkv:S:D, each optionally followed by +window<W>, "
                 "+softcap<C>, +alibi, +sinks, and the storage +bf16, +kvtok, +int8, +q8_0, +pg<N>"),
      flagRow("BenchVariantsMatchNothing", "a sweep's `--variants` filter that no variant's name holds",
              {"bench", "--sweep", "--variants", "nosuchvariant", "--shape", "decode:1:4:2:64:64"},
              "--variants: 'nosuchvariant' is in no variant's name; accepted: parts of the names, which are made "
              "of: auto, w4, k1"),
      {.id = "DevicesJsonWithoutCoopMat",
       .area = "command line",
       .input = "`foundry devices --json` on a device without cooperative matrices",
       .args = {"devices", "--json"},
       .exitCode = 0,
       .fragment = "\"cooperative_matrix\": null,",
       .note = "null, not the table's \"-\"",
       .quiet = true},
      emptyValue("EmptyExpect", {"run", "{tmp}/model.json", "--expect", ""}, "--expect: '' is not a file path"),
      emptyValue("EmptyInputs", {"run", "{tmp}/model.json", "--inputs", ""}, "--inputs: '' is not a file path"),
      emptyValue("EmptyRunJson", {"run", "{tmp}/model.json", "--json", ""}, "--json: '' is not a file path"),
      emptyValue("EmptySave", {"run", "{tmp}/model.json", "--save", ""}, "--save: '' is not a file path"),
      emptyValue("EmptyTolerance", {"run", "{tmp}/model.json", "--tolerance", ""}, "--tolerance: '' is not a number"),
      emptyValue("EmptyConfig", {"run", ""}, "config: '' is not a file path"),
      emptyValue("EmptyDump", {"kernels", "--dump", ""}, "--dump: '' is not a directory path"),
      emptyValue("EmptyPretend", {"kernels", "--pretend", ""}, "--pretend: '' is empty; accepted: Plan for a device"),
      emptyValue("EmptyBenchJson", {"bench", "--json", ""}, "--json: '' is not a file path"),
      emptyValue("EmptyDevice", {"--device", "", "devices"}, "--device: '' is empty; accepted: Vulkan device: index"),
      emptyValue("EmptyLogLevel", {"--log-level", "", "knobs"},
                 "--log-level: '' is empty; accepted: trace, debug, info, warn, error, off"),

      // ---- Knobs: flags, environment.
      {.id = "KnobInvalidValueFlag",
       .area = "knobs",
       .input = "an invalid knob value on the command line",
       .args = {"devices", "--set", "FA_DECODE_WARPS=3"},
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_DECODE_WARPS (--set): invalid value '3'; accepted: auto, 1, 2, 4, 8, 16"},
      {.id = "KnobUnknownFlag",
       .area = "knobs",
       .input = "a misspelt knob on the command line",
       .args = {"knobs", "--set", "FA_DECODE_WRAPS=4"},
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_DECODE_WRAPS (--set): unknown knob; accepted: FOUNDRY_DISABLE_FA"},
      {.id = "KnobEmptyValueFlag",
       .area = "knobs",
       .input = "a knob given an empty value on the command line",
       .args = {"--set", "FA_DECODE_WARPS=", "knobs"},
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_DECODE_WARPS (--set): invalid value ''; accepted: auto, 1, 2, 4, 8, 16"},
      {.id = "KnobWithoutEquals",
       .area = "knobs",
       .input = "`--set` without `=`",
       .args = {"knobs", "--set", "FA_DECODE_WARPS"},
       .exitCode = 2,
       .fragment = "--set: expected NAME=VALUE, got 'FA_DECODE_WARPS'"},
      {.id = "KnobInvalidValueEnv",
       .area = "knobs",
       .input = "an invalid knob value in the environment",
       .args = {"knobs"},
       .env = {{"FOUNDRY_FA_DECODE_TG_OUT", "double"}},
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_DECODE_TG_OUT (environment): invalid value 'double'; accepted: auto, float, half"},
      {.id = "KnobOutOfRangeEnv",
       .area = "knobs",
       .input = "a knob value out of range",
       .args = {"knobs"},
       .env = {{"FOUNDRY_FA_PREFILL_SPLIT_K", "257"}},
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_PREFILL_SPLIT_K (environment): invalid value '257'; accepted: auto or 1..256"},
      {.id = "KnobSwitchGarbage",
       .area = "knobs",
       .input = "a switch that is neither on nor off",
       .args = {"knobs"},
       .env = {{"FOUNDRY_VALIDATION", "maybe"}},
       .exitCode = 2,
       .fragment = "FOUNDRY_VALIDATION (environment): invalid value 'maybe'; accepted: 0, 1, true, false, on, off"},
      {.id = "KnobTileDoesNotFit",
       .area = "knobs",
       .input = "a forced prefill tile the device's shared memory cannot hold",
       .args = {"--set", "FA_PREFILL_KEYS_PER_TILE=128", "kernels", "--pretend", "lavapipe", "--dtype", "f32"},
       .exitCode = 2,
       .fragment = "FOUNDRY_FA_PREFILL_KEYS_PER_TILE: 128 cannot be used here"},
      {.id = "KnobUnknownEnv",
       .area = "knobs",
       .input = "a misspelt `FOUNDRY_*` variable",
       .args = {"knobs"},
       .env = {{"FOUNDRY_DECODE_WARPS", "4"}},
       .exitCode = 2,
       .fragment = "FOUNDRY_DECODE_WARPS (environment): unknown knob"},
      {.id = "LogLevelUnknown",
       .area = "knobs",
       .input = "an unknown log level",
       .args = {"--log-level", "loud", "knobs"},
       .exitCode = 2,
       .fragment = "FOUNDRY_LOG_LEVEL (--log-level): invalid value 'loud'; accepted: trace, debug, info, warn"},
      {.id = "KernelDirMissing",
       .area = "knobs",
       .input = "`FOUNDRY_KERNEL_DIR` naming no directory",
       .args = {"kernels", "--pretend", "lavapipe"},
       .env = {{"FOUNDRY_KERNEL_DIR", "{tmp}/no-kernels"}},
       .exitCode = 2,
       .fragment = "FOUNDRY_KERNEL_DIR: '{tmp}/no-kernels' is not a directory"},

      // ---- Devices and drivers.
      {.id = "NoVulkanDriver",
       .area = "device",
       .input = "no Vulkan driver at all",
       .args = {"devices"},
       .env = {{"VK_DRIVER_FILES", "{tmp}/no-such-driver.json"}, {"VK_ICD_FILENAMES", "{tmp}/no-such-driver.json"}},
       .exitCode = 4,
       .fragment = "no usable Vulkan driver (VK_ERROR_INCOMPATIBLE_DRIVER: the loader says:",
       .note = "the loader's own complaint is part of the one line"},
      {.id = "ValidationLayerMissing",
       .area = "device",
       .input = "validation asked for, layer not installed",
       .args = {"devices"},
       .env = {{"FOUNDRY_VALIDATION", "1"}, {"VK_LAYER_PATH", "{tmp}"}, {"VK_ADD_LAYER_PATH", std::nullopt}},
       .exitCode = 3,
       .fragment = "FOUNDRY_VALIDATION=1 needs VK_LAYER_KHRONOS_validation, which is not installed"},
      {.id = "NoSuchDevice",
       .area = "device",
       .input = "a device index that does not exist",
       .args = {"--device", "7", "kernels"},
       .exitCode = 2,
       .fragment = "FOUNDRY_DEVICE: '7' matches no Vulkan device; available: 0:"},

      // ---- Kernels.
      {.id = "BrokenSnippet",
       .area = "kernels",
       .input = "a kernel directory with a broken snippet",
       .args = kCompile,
       .env = {{"FOUNDRY_KERNEL_DIR", "{tmp}/kernels"}},
       .setup =
           [](const CliContext& ctx) {
             fs::copy(ctx.source / "kernels", ctx.tmp / "kernels", fs::copy_options::recursive);
             const auto rope = ctx.tmp / "kernels" / "rope" / "rope.glsl";
             std::string text = readText(rope);
             if (!text.ends_with("\n")) text += "\n";
             writeBytes(rope, text + "this is not GLSL;\n");
           },
       .exitCode = 4,
       .fragment = "kernels/rope/rope.glsl:",
       .note = "the error quotes the numbered lines around the failure",
       .multiLine = true,
       .check = [](const CliContext& ctx, const CliOutcome& o) -> std::string {
         const std::string original = readText(ctx.source / "kernels/rope/rope.glsl");
         const auto lines = std::count(original.begin(), original.end(), '\n') + (original.ends_with("\n") ? 0 : 1);
         const std::string quoted = fmt::format("> {:4} | this is not GLSL;", lines + 1);
         return o.err.find(quoted) == std::string::npos ? "the message does not quote '" + quoted + "'" : "";
       }},

      // ---- Output files: written whole or not at all.
      {.id = "DumpIntoAFile",
       .area = "files",
       .input = "`--dump` below a path that is a file",
       .args = {"kernels", "--pretend", "h200", "--dump", "{tmp}/not-a-dir/dump"},
       .setup = [](const CliContext& ctx) { writeBytes(ctx.tmp / "not-a-dir", "a file\n"); },
       .exitCode = 4,
       .fragment = "cannot create the kernel dump directory {tmp}/not-a-dir/dump",
       .note = "nothing is written",
       .check = leavesOnly({"not-a-dir"})},
      {.id = "DumpFileBlocked",
       .area = "files",
       .input = "`--dump` where one output name is taken by a directory",
       .args = {"kernels", "--pretend", "h200", "--dump", "{tmp}/dump"},
       .setup =
           [](const CliContext& ctx) {
             ctx.foundry({"kernels", "--pretend", "h200", "--dump", "{tmp}/whole"}, {});
             // Block the .json of the last kernel the catalog lists: the others are written first.
             std::vector<std::string> names;
             for (const auto& e : fs::directory_iterator(ctx.tmp / "whole")) {
               if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
             }
             if (names.empty()) throw std::runtime_error("the probe run dumped nothing");
             const std::string stdoutText = ctx.foundry({"kernels", "--pretend", "h200"}, {});
             std::string last = names.front();
             std::size_t lastAt = 0;
             for (const auto& n : names) {
               const auto at = stdoutText.find(n.substr(0, n.size() - 5) + " ");
               if (at != std::string::npos && at >= lastAt) {
                 lastAt = at;
                 last = n;
               }
             }
             fs::create_directories(ctx.tmp / "dump" / last / "occupied");
           },
       .exitCode = 2,
       .fragment = "cannot write {tmp}/dump/",
       .note = "files already written are whole; no temporary file remains",
       .check = [](const CliContext& ctx, const CliOutcome&) -> std::string {
         for (const auto& e : fs::directory_iterator(ctx.tmp / "dump")) {
           const std::string name = e.path().filename().string();
           if (name.find(".tmp.") != std::string::npos) return "a temporary file remains: " + name;
           if (e.is_directory()) continue;
           if (readText(e.path()) != readText(ctx.tmp / "whole" / name)) return name + " is not whole";
         }
         return "";
       }},
      {.id = "BenchJsonMissingDirectory",
       .area = "files",
       .input = "`--json` into a missing directory",
       .args = {"bench", "--suite", "smoke", "--json", "{tmp}/missing/results.json"},
       .exitCode = 4,
       .fragment = "cannot write {tmp}/missing/results.json: No such file or directory",
       .note = "nothing is written",
       .check = leavesOnly({})},

      // ---- The kernel cache.
      {.id = "CacheDirUnwritable",
       .area = "cache",
       .input = "an unwritable cache directory",
       .args = kCompile,
       .env = {{"FOUNDRY_CACHE_DIR", "{tmp}/not-a-dir/cache"}},
       .setup = [](const CliContext& ctx) { writeBytes(ctx.tmp / "not-a-dir", "a file\n"); },
       .exitCode = 0,
       .fragment = "kernel cache disabled, continuing uncached: cannot create {tmp}/not-a-dir/cache",
       .note = "the run continues uncached, with one warning",
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         return cacheLine(o.out).ends_with("disk cache off") ? "" : "expected 'disk cache off' in: " + cacheLine(o.out);
       }},
      {.id = "CacheEntryCorrupted",
       .area = "cache",
       .input = "a corrupted cache entry (one byte flipped)",
       .args = kCompile,
       .env = kCacheEnv,
       .setup = damagedCache([](const fs::path& entry) {
         std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
         f.seekg(-5, std::ios::end);
         const char c = static_cast<char>(f.get());
         f.seekp(-5, std::ios::end);
         f.put(static_cast<char>(c ^ 0x40));
       }),
       .exitCode = 0,
       .fragment = "is corrupted (checksum mismatch); rebuilding it",
       .note = "detected, rebuilt, valid for the next run",
       .check = compiledThenAgain(1, 0)},
      {.id = "CacheEntryTruncated",
       .area = "cache",
       .input = "a truncated cache entry",
       .args = kCompile,
       .env = kCacheEnv,
       .setup = damagedCache([](const fs::path& entry) { fs::resize_file(entry, fs::file_size(entry) / 2); }),
       .exitCode = 0,
       .fragment = "is truncated; rebuilding it",
       .note = "detected, rebuilt, valid for the next run",
       .check = compiledThenAgain(1, 0)},
  };
  return rows;
}

std::vector<CliRow> allCliRows() {
  auto rows = cliRows();
  for (auto& r : runCommandRows()) rows.push_back(std::move(r));
  for (auto& r : inputRows()) rows.push_back(std::move(r));
  for (auto& r : configRows()) rows.push_back(std::move(r));
  for (auto& r : outputRows()) rows.push_back(std::move(r));
  for (auto& r : cacheKnobRows()) rows.push_back(std::move(r));
  return rows;
}

std::string substituteTmp(const std::string& text, const fs::path& tmp) {
  std::string out = text;
  const std::string needle = "{tmp}";
  for (auto at = out.find(needle); at != std::string::npos; at = out.find(needle, at)) {
    out.replace(at, needle.size(), tmp.string());
    at += tmp.string().size();
  }
  return out;
}

}  // namespace foundry::errors
