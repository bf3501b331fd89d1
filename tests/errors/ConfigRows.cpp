// Rows for config values that configs/schema.json and the loader must treat alike: knob values in
// `tuning` reported under their JSON pointer and shown as written, numbers far out of range shown as
// given (never wrapped to 32 bits), and the values the schema and the knob table once disagreed on.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"

namespace foundry::errors {

namespace {

using json = nlohmann::json;

/// `foundry run {tmp}/model.json` on the base config with `pointer` set to `value`.
CliRow configValue(std::string id, std::string input, const std::string& pointer, json value, std::string fragment) {
  json c = baseConfig();
  c[json::json_pointer(pointer)] = std::move(value);
  const std::string text = c.dump(2);
  return {.id = std::move(id),
          .area = "config",
          .input = std::move(input),
          .args = {"run", "{tmp}/model.json"},
          .setup = [text](const CliContext& ctx) { writeBytes(ctx.tmp / "model.json", text); },
          .exitCode = 2,
          .fragment = std::move(fragment)};
}

}  // namespace

std::vector<CliRow> configRows() {
  return {
      configValue("ConfigTuningUnrollOutsideSchema", "`tuning` decode unroll 32 (the schema and the knob take 1 to 16)",
                  "/tuning/fa_decode_unroll", 32,
                  "/tuning/fa_decode_unroll: invalid value '32'; accepted: auto, 1, 2, 4, 8, 16"),
      configValue("ConfigTuningSplitKAbove32Bits", "`tuning` Split-K 4294967297 (2^32 + 1)", "/tuning/fa_decode_split_k",
                  4294967297ll, "/tuning/fa_decode_split_k: invalid value '4294967297'; accepted: auto or 1..256"),
      configValue("ConfigTuningWarpsNegative", "`tuning` decode warps -1", "/tuning/fa_decode_warps", -1,
                  "/tuning/fa_decode_warps: invalid value '-1'"),
      configValue("ConfigTuningSplitKHuge", "`tuning` prefill Split-K 1e30", "/tuning/fa_prefill_split_k", 1e30,
                  "/tuning/fa_prefill_split_k: invalid value '1e+30'"),
      configValue("ConfigTuningSplitKPaddedString", "`tuning` prefill Split-K \"08\": the knob reads 8, the schema's "
                  "pattern refuses it", "/tuning/fa_prefill_split_k", "08", "found \"08\" (a string) (configs/schema.json)"),
      configValue("ConfigBatchAbove32Bits", "run.batch 4294967297 (2^32 + 1)", "/run/batch", 4294967297ll,
                  "/run/batch: expected an integer from 1 to 1024, found 4294967297"),
      configValue("ConfigPromptLensEmpty", "run.prompt_lens of no sequence", "/run/prompt_lens", json::array(),
                  "/run/prompt_lens: expected an array of 1 to 1024 items, found an empty array"),
      configValue("ConfigTuningEmpty", "a `tuning` knob given an empty string", "/tuning/fa_decode_warps", "",
                  "/tuning/fa_decode_warps: invalid value ''; accepted: auto, 1, 2, 4, 8, 16"),
      configValue("ConfigSlopeOutOfRange", "an ALiBi slope of 1e30",
                  "/attention/modifiers", json::parse(R"([{"type": "alibi", "slopes": [1e30]}])"),
                  "/attention/modifiers/0/slopes/0: expected a number of at least -1000 and at most 1000, found 1e+30"),
      configValue("ConfigTuningDeviceUnknown", "`tuning` device that names no Vulkan device", "/tuning/device", "nope",
                  "/tuning/device: 'nope' matches no Vulkan device; available: 0:"),
      configValue("ConfigAlibiAfterSoftCap", "ALiBi listed after a soft-cap (its bias enters before every score modifier)",
                  "/attention/modifiers",
                  json::parse(R"([{"type": "soft_cap", "cap": 30.0}, {"type": "alibi"}])"),
                  "/attention/modifiers/1: alibi comes after soft_cap (modifier 0) on layer 0, but ALiBi's bias is "
                  "added to the logit before any score modifier: list alibi before soft_cap"),
      configValue("ConfigLatentValuesWithoutValueDim", "`latent_values` without a narrower value_dim",
                  "/attention/latent_values", true,
                  "/attention/value_dim: latent_values reads the values from the last value_dim columns of each key "
                  "row: value_dim must be given and below head_dim (128), found 128"),
      {.id = "ConfigLatentValuesInt8",
       .area = "config",
       .input = "DeepSeek-V2-Lite (latent values) with int8 caches",
       .args = {"run", "{tmp}/deepseek.json", "--kv-dtype", "int8"},
       .setup =
           [](const CliContext& ctx) {
             std::filesystem::copy_file(ctx.source / "configs" / "deepseek-v2-lite.json", ctx.tmp / "deepseek.json");
           },
       .exitCode = 3,
       .fragment = "--kv-dtype: int8 caches with latent_values: the values would read their scales through a view "
                   "of the keys' scales, which is not built; accepted: f16, bf16, f32"},
  };
}

}  // namespace foundry::errors
