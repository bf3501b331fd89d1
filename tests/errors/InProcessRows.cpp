// Rows that call the library: config files and safetensors files read from disk, attention calls the
// step must refuse, and device allocations. Each config, safetensors and allocation row has a twin in
// RunRows.cpp that gives the same input to `foundry run`; these check the error's kind and field.
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"
#include "foundry/DeviceInfo.h"
#include "foundry/KvQuant.h"
#include "foundry/Runtime.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/runner/io/Safetensors.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/MergeStep.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/steps/SdpaReferenceStep.h"
#include "foundry/testing/ShapeCall.h"

namespace foundry::errors {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// No subcommand reaches these calls: `foundry run` checks the config (and its flags) first and refuses
// such a run there (rows RunConfig* and RunPrompt* in RunRows.cpp).
constexpr const char* kStoppedAtConfig = "library only: `foundry run` stops it at the config";

// ---- Config files.

/// Loads {tmp}/model.json holding `text`.
std::function<void(const InProcessContext&)> configText(std::string text) {
  return [text](const InProcessContext& ctx) {
    writeBytes(ctx.tmp / "model.json", text);
    loadModelConfig(ctx.tmp / "model.json");
  };
}
/// The base config with `pointer` set to `value`.
std::function<void(const InProcessContext&)> configWith(const std::string& pointer, json value) {
  json c = baseConfig();
  c[json::json_pointer(pointer)] = std::move(value);
  return configText(c.dump(2));
}

// ---- safetensors files.

/// Reads {tmp}/weights.safetensors holding `bytes`.
std::function<void(const InProcessContext&)> weights(std::string bytes) {
  return [bytes](const InProcessContext& ctx) {
    writeBytes(ctx.tmp / "weights.safetensors", bytes);
    readSafetensors(ctx.tmp / "weights.safetensors");
  };
}

// ---- Attention calls, validated by the step on a preset device (no GPU needed).

std::function<void(const InProcessContext&)> attention(test::CallShape shape) {
  return [shape](const InProcessContext&) {
    const DeviceInfo device = parseDevicePreset("lavapipe");
    FlashAttentionStep(device, SnippetLibrary::embedded(), AttentionOptions()).validate(test::shapeCall(shape));
  };
}

std::function<void(const InProcessContext&)> attentionPlan(test::CallShape shape) {
  return [shape](const InProcessContext&) {
    const DeviceInfo device = parseDevicePreset("lavapipe");
    FlashAttentionStep(device, SnippetLibrary::embedded(), AttentionOptions()).plan(test::shapeCall(shape));
  };
}

std::function<void(const InProcessContext&)> attentionCall(std::function<AttentionCall()> make,
                                                          std::string preset = "lavapipe") {
  return [make, preset](const InProcessContext&) {
    const DeviceInfo device = parseDevicePreset(preset);
    FlashAttentionStep(device, SnippetLibrary::embedded(), AttentionOptions()).validate(make());
  };
}

// ---- Merges of partial results (MergeStep::validate): `parts` [1, 8, 4, 64] f16 outputs with their LSEs.

constexpr const char* kMergeLibrary = "library only: no subcommand takes partial results from a user";

MergeCall mergeCall(std::uint32_t parts) {
  MergeCall c;
  for (std::uint32_t i = 0; i < parts; ++i) {
    c.parts.push_back({Tensor::describe(fmt::format("o{}", i), DType::F16, {1, 8, 4, 64}, Layout::HeadMajor),
                       Tensor::describe(fmt::format("lse{}", i), DType::F32, {1, 8, 4})});
  }
  c.o = Tensor::describe("merged", DType::F16, {1, 8, 4, 64}, Layout::HeadMajor);
  return c;
}

std::function<void(const InProcessContext&)> merge(std::function<void(MergeCall&)> change) {
  return [change](const InProcessContext&) {
    MergeCall c = mergeCall(2);
    change(c);
    MergeStep(parseDevicePreset("lavapipe"), SnippetLibrary::embedded()).validate(c);
  };
}

// ---- Appends into paged caches (KvAppendStep::run checks before it records anything).

/// Records nothing: the rows below must be refused before any dispatch.
class RefusingDispatcher : public Dispatcher {
 public:
  void dispatch(const KernelSource& kernel, const Arguments&, Grid) override {
    throw InternalError(fmt::format("'{}' was dispatched; the call should have been refused", kernel.name));
  }
  SubmitResult submit() override { return {}; }
};

/// Appends 4 f16 tokens at `pos` for 2 sequences (2 KV heads, D 64) into pools of 9 pages of 16 rows
/// through `table` [2, 4].
std::function<void(const InProcessContext&)> pagedAppend(std::uint32_t pos, std::vector<std::uint32_t> table) {
  return [pos, table](const InProcessContext&) {
    const DeviceInfo device = parseDevicePreset("lavapipe");
    const Tensor rows = Tensor::describe("k_new", DType::F16, {2, 2, 4, 64}, Layout::HeadMajor);
    const Tensor pool = Tensor::describe("k_pool", DType::F16, {9, 2, 16, 64}, Layout::KvCache);
    const PagedKv pages{Tensor::describe("block_table", DType::U32, {2, 4}), table};
    RefusingDispatcher dispatcher;
    ShapeWorkspace workspace;
    StepContext ctx{dispatcher, workspace, nullptr};
    KvAppendStep(device, SnippetLibrary::embedded()).run(ctx, rows, rows, pool, pool, pos, std::nullopt, &pages);
  };
}

const std::string kConfigFile = "(in {tmp}/model.json)";
const std::string kWeightsFile = "(in {tmp}/weights.safetensors)";

}  // namespace

std::vector<InProcessRow> inProcessRows() {
  return {
      // ---- Model configs (loadModelConfig).
      {.id = "ConfigMalformed",
       .area = "config",
       .input = "malformed JSON",
       .via = "loadModelConfig",
       .field = "",
       .fragment = "malformed JSON at line 2, column 11",
       .action = configText("{\n  \"name\": ,\n}"),
       .mentions = kConfigFile},
      {.id = "ConfigTruncated",
       .area = "config",
       .input = "truncated JSON",
       .via = "loadModelConfig",
       .field = "",
       .fragment = "malformed JSON at line",
       .action = configText(baseConfig().dump(2).substr(0, 60)),
       .mentions = kConfigFile},
      {.id = "ConfigEmpty",
       .area = "config",
       .input = "an empty file",
       .via = "loadModelConfig",
       .field = "",
       .fragment = "malformed JSON at line 1, column 1",
       .action = configText(""),
       .mentions = kConfigFile},
      {.id = "ConfigDuplicateKey",
       .area = "config",
       .input = "a key given twice",
       .via = "loadModelConfig",
       .field = "/name",
       .fragment = "duplicate key \"name\"",
       .action = configText(R"({"name": "a", "name": "b"})"),
       .mentions = kConfigFile},
      {.id = "ConfigWrongType",
       .area = "config",
       .input = "a number given as a string",
       .via = "loadModelConfig",
       .field = "/attention/n_heads",
       .fragment = "expected an integer from 1 to 1024, found \"32\" (a string)",
       .action = configWith("/attention/n_heads", "32"),
       .mentions = kConfigFile},
      {.id = "ConfigUnknownKey",
       .area = "config",
       .input = "an unknown key",
       .via = "loadModelConfig",
       .field = "/attention/n_head",
       .fragment = "unknown key \"n_head\"; accepted: layers, n_heads",
       .action = configWith("/attention/n_head", 32),
       .mentions = kConfigFile},
      {.id = "ConfigTwoToThe40Heads",
       .area = "config",
       .input = "2^40 heads",
       .via = "loadModelConfig",
       .field = "/attention/n_heads",
       .fragment = "expected an integer from 1 to 1024, found 1099511627776",
       .action = configWith("/attention/n_heads", 1ll << 40),
       .mentions = kConfigFile},
      {.id = "ConfigNegativeHeadDim",
       .area = "config",
       .input = "a negative head_dim",
       .via = "loadModelConfig",
       .field = "/attention/head_dim",
       .fragment = "expected an integer from 1 to 1024, found -64",
       .action = configWith("/attention/head_dim", -64),
       .mentions = kConfigFile},
      {.id = "ConfigZeroLayers",
       .area = "config",
       .input = "zero layers",
       .via = "loadModelConfig",
       .field = "/attention/layers",
       .fragment = "expected an integer from 1 to 1024, found 0",
       .action = configWith("/attention/layers", 0),
       .mentions = kConfigFile},
      {.id = "ConfigHeadsNotAMultiple",
       .area = "config",
       .input = "n_heads not divisible by n_kv_heads",
       .via = "loadModelConfig",
       .field = "/attention/n_kv_heads",
       .fragment = "n_heads (32) must be a multiple of n_kv_heads (5)",
       .action = configWith("/attention/n_kv_heads", 5),
       .mentions = kConfigFile},
      {.id = "ConfigBeyondMaxContext",
       .area = "config",
       .input = "prompt + decode tokens beyond max_context",
       .via = "loadModelConfig",
       .field = "/run/decode_tokens",
       .fragment = "prompt_len + decode_tokens = 4090 + 8 = 4098 exceeds max_context (4096)",
       .action = configWith("/run/prompt_len", 4090),
       .mentions = kConfigFile},
      {.id = "ConfigTuningInvalid",
       .area = "config",
       .input = "an invalid knob value in `tuning`",
       .via = "loadModelConfig",
       .field = "/tuning/fa_decode_warps",
       .fragment = "invalid value '3'; accepted: auto, 1, 2, 4, 8, 16",
       .action = configWith("/tuning/fa_decode_warps", 3),
       .mentions = kConfigFile},
      {.id = "ConfigMissingFile",
       .area = "config",
       .input = "a file that does not exist",
       .via = "loadModelConfig",
       .field = "",
       .fragment = "cannot read config {tmp}/missing.json: No such file or directory",
       .action = [](const InProcessContext& ctx) { loadModelConfig(ctx.tmp / "missing.json"); }},
      {.id = "ConfigOver16MiB",
       .area = "config",
       .input = "a file over 16 MiB",
       .via = "loadModelConfig",
       .field = "",
       .fragment = "is larger than the limit of 16777216 bytes",
       .action = configText(baseConfig().dump() + std::string(kMaxConfigBytes, ' ')),
       .mentions = "{tmp}/model.json"},

      // ---- safetensors files (readSafetensors).
      {.id = "WeightsEmpty",
       .area = "safetensors",
       .input = "an empty file",
       .via = "readSafetensors",
       .field = "",
       .fragment = "file is 0 bytes; a safetensors file starts with an 8-byte header length",
       .action = weights(""),
       .mentions = kWeightsFile},
      {.id = "WeightsTruncated",
       .area = "safetensors",
       .input = "a truncated file (data cut short)",
       .via = "readSafetensors",
       .field = "/a/data_offsets",
       .fragment = "offsets [0, 8) run past the end of the data (5 bytes)",
       .action = weights(safetensors(entry("F32", "[2]", "[0,8]"), 5)),
       .mentions = kWeightsFile},
      {.id = "WeightsHeaderPastEnd",
       .area = "safetensors",
       .input = "header length past the end of the file",
       .via = "readSafetensors",
       .field = "",
       .fragment = "header length 1000 runs past the end of the file (20 bytes)",
       .action = weights(le64(1000) + std::string(12, '{')),
       .mentions = kWeightsFile},
      {.id = "WeightsHeaderOver100MB",
       .area = "safetensors",
       .input = "a header over 100 MB",
       .via = "readSafetensors",
       .field = "",
       .fragment = "header length 100000001 exceeds the limit of 100000000 bytes",
       .note = "rejected before allocating",
       .action = weights(le64(100'000'001) + "{}"),
       .mentions = kWeightsFile},
      {.id = "WeightsHeaderNotJson",
       .area = "safetensors",
       .input = "a header that is not JSON",
       .via = "readSafetensors",
       .field = "",
       .fragment = "header is not valid JSON: malformed JSON at line 1, column 2",
       .action = weights(safetensors("{]", 0)),
       .mentions = kWeightsFile},
      {.id = "WeightsOverlap",
       .area = "safetensors",
       .input = "overlapping offsets",
       .via = "readSafetensors",
       .field = "/b/data_offsets",
       .fragment = "tensor \"b\" [4, 12) overlaps tensor \"a\" [0, 8)",
       .action = weights(safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     12)),
       .mentions = kWeightsFile},
      {.id = "WeightsOffsetsOutOfRange",
       .area = "safetensors",
       .input = "offsets beyond the data",
       .via = "readSafetensors",
       .field = "/a/data_offsets",
       .fragment = "offsets [0, 1099511627776) run past the end of the data (8 bytes)",
       .action = weights(safetensors(entry("F32", "[274877906944]", "[0,1099511627776]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsBeginAfterEnd",
       .area = "safetensors",
       .input = "begin after end",
       .via = "readSafetensors",
       .field = "/a/data_offsets",
       .fragment = "tensor \"a\": begin 8 is after end 0",
       .action = weights(safetensors(entry("F32", "[2]", "[8,0]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsDTypeMismatch",
       .area = "safetensors",
       .input = "byte count that does not fit the dtype",
       .via = "readSafetensors",
       .field = "/a/data_offsets",
       .fragment = "tensor \"a\": holds 8 bytes but shape [2] of F16 needs 4",
       .action = weights(safetensors(entry("F16", "[2]", "[0,8]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsShapeMismatch",
       .area = "safetensors",
       .input = "byte count that does not fit the shape",
       .via = "readSafetensors",
       .field = "/a/data_offsets",
       .fragment = "tensor \"a\": holds 8 bytes but shape [3] of F32 needs 12",
       .action = weights(safetensors(entry("F32", "[3]", "[0,8]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsNegativeDim",
       .area = "safetensors",
       .input = "a negative dimension",
       .via = "readSafetensors",
       .field = "/a/shape/1",
       .fragment = "expected a dimension from 0 to 2^63-1, found -2",
       .action = weights(safetensors(entry("F32", "[1,-2]", "[0,8]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsShapeOverflow",
       .area = "safetensors",
       .input = "a shape whose size overflows 64 bits",
       .via = "readSafetensors",
       .field = "/a/shape",
       .fragment = "has more bytes than fit in 64 bits",
       .action = weights(safetensors(entry("F32", "[4294967296,4294967296,2]", "[0,8]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsUnsupportedDType",
       .area = "safetensors",
       .input = "a dtype Foundry does not read",
       .via = "readSafetensors",
       .kind = ErrorKind::Unsupported,
       .fragment = "/a/dtype: dtype F64 is not supported; supported: F16, F32, BF16",
       .action = weights(safetensors(entry("F64", "[1]", "[0,8]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsTrailingBytes",
       .area = "safetensors",
       .input = "bytes that belong to no tensor",
       .via = "readSafetensors",
       .field = "",
       .fragment = "bytes [4, 8) at the end of the data belong to no tensor",
       .action = weights(safetensors(entry("F32", "[1]", "[0,4]"), 8)),
       .mentions = kWeightsFile},
      {.id = "WeightsMissingFile",
       .area = "safetensors",
       .input = "a file that does not exist",
       .via = "readSafetensors",
       .field = "",
       .fragment = "cannot read: No such file or directory",
       .action = [](const InProcessContext& ctx) { readSafetensors(ctx.tmp / "missing.safetensors"); },
       .mentions = "(in {tmp}/missing.safetensors)"},

      // ---- Attention calls (FlashAttentionStep::validate).
      {.id = "CallKvLenBeyondCapacity",
       .area = "attention call",
       .input = "kv_len beyond the cache's capacity",
       .via = "FlashAttentionStep::validate",
       .field = "kv_len",
       .fragment = "kv_len 100 must be in 1..capacity 64",
       .action = attention({.kvLen = 100, .capacity = 64}),
       .cliPending = kStoppedAtConfig},
      {.id = "CallHeadsNotAMultiple",
       .area = "attention call",
       .input = "n_heads not divisible by n_kv_heads",
       .via = "FlashAttentionStep::validate",
       .field = "n_heads",
       .fragment = "n_heads (32) must be a multiple of n_kv_heads (5)",
       .action = attention({.nHeads = 32, .nKvHeads = 5})},
      {.id = "CallTwoToThe40Heads",
       .area = "attention call",
       .input = "a query tensor with 2^40 heads",
       .via = "FlashAttentionStep::validate",
       .field = "q",
       .fragment = "dimension 1 of tensor 'q' is 1099511627776; dimensions must be below 2^32",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({.nHeads = 8, .nKvHeads = 8, .headDim = 64});
         c.q = Tensor::describe("q", DType::F16, {1, 1ll << 40, 1, 64}, Layout::HeadMajor);
         c.o = Tensor::describe("o", DType::F16, {1, 1ll << 40, 1, 64}, Layout::HeadMajor);
         return c;
       }),
       .cliPending = kStoppedAtConfig},
      {.id = "CallQLenBeyondKvLen",
       .area = "attention call",
       .input = "more new tokens than the cache holds",
       .via = "FlashAttentionStep::validate",
       .field = "q_len",
       .fragment = "q_len 65 exceeds kv_len 64",
       .action = attention({.qLen = 65, .kvLen = 64}),
       .cliPending = kStoppedAtConfig},
      {.id = "CallSplitKnobPastTheLoopLimit",
       .area = "attention call",
       .input = "a forced Split-K that leaves one workgroup past llvmpipe's loop limit",
       .via = "FlashAttentionStep::plan",
       .field = "FOUNDRY_FA_DECODE_SPLIT_K",
       .fragment = "ends a shader invocation's loops after 65535 passes",
       .action = [](const InProcessContext&) {
         const AttentionOptions knobs = AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "1"}});
         FlashAttentionStep(parseDevicePreset("lavapipe"), SnippetLibrary::embedded(), knobs)
             .plan(test::shapeCall({.nHeads = 4, .nKvHeads = 1, .kvLen = 200000}));
       },
       .mentions = "or more splits",
       .cliPending = kStoppedAtConfig},
      {.id = "ReferenceKvPastTheLoopLimit",
       .area = "attention call",
       .input = "SdpaReferenceStep over more keys than llvmpipe's loop limit lets one invocation run",
       .via = "SdpaReferenceStep::validate",
       .kind = ErrorKind::Unsupported,
       .fragment = "llvmpipe's loop limit",
       .action = [](const InProcessContext&) {
         SdpaReferenceStep(parseDevicePreset("lavapipe"), SnippetLibrary::embedded())
             .validate(test::shapeCall({.nHeads = 1, .nKvHeads = 1, .kvLen = 500000, .headDim = 64}));
       },
       .mentions = "Use FlashAttentionStep",
       .cliPending = kStoppedAtConfig},
      {.id = "CallHeadDim1024F32",
       .area = "attention call",
       .input = "an f32 head_dim whose prefill tiles do not fit the device",
       .via = "FlashAttentionStep::plan",
       .kind = ErrorKind::Unsupported,
       .fragment = "no prefill tile for head_dim 1024 with f32 tiles fits device",
       .action = attentionPlan({.qLen = 64, .kvLen = 64, .headDim = 1024, .dtype = DType::F32})},
      {.id = "CallBf16Without16BitStorage",
       .area = "attention call",
       .input = "a format the device cannot read (bf16 without 16-bit storage)",
       .via = "FlashAttentionStep::validate",
       .kind = ErrorKind::Unsupported,
       .fragment = "k: bf16 tensors: device 'custom' cannot store 16-bit values in buffers (no "
                   "storageBuffer16BitAccess); use f32",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({.dtype = DType::F32});
         c.k.dtype = c.v.dtype = DType::BF16;
         return c;
       }, "lavapipe,storage16=0,name=custom")},
      {.id = "CallInt8Without16BitStorage",
       .area = "attention call",
       .input = "an int8 cache on a device that cannot read its f16 scales",
       .via = "FlashAttentionStep::validate",
       .kind = ErrorKind::Unsupported,
       .fragment = "k: int8 tensors: device 'custom' cannot read the f16 scales of int8 blocks (no "
                   "storageBuffer16BitAccess); use f32",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({.dtype = DType::F32});
         for (Tensor* t : {&c.k, &c.v}) {
           t->dtype = DType::I8;
           t->scales = std::make_shared<Tensor>(scalesShape(*t));
         }
         return c;
       }, "lavapipe,storage16=0,name=custom")},
      {.id = "CallInt8WithoutScales",
       .area = "attention call",
       .input = "an int8 cache without its scales tensor",
       .via = "FlashAttentionStep::validate",
       .field = "v",
       .fragment = "'v_cache' is int8 but has no scales tensor (Tensor::scales, f16 [1, 8, 32, 4]",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({});
         c.k.dtype = c.v.dtype = DType::I8;
         c.k.scales = std::make_shared<Tensor>(scalesShape(c.k));
         return c;
       })},
      {.id = "CallQ8RowsNotWholeBlocks",
       .area = "attention call",
       .input = "a q8_0 cache whose rows do not start at block boundaries",
       .via = "FlashAttentionStep::validate",
       .field = "k",
       .fragment = "'k_cache' is q8_0, whose rows are whole blocks of 32 values, but its row stride is 144; "
                   "accepted: multiples of 32",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({});
         c.k.dtype = c.v.dtype = DType::Q8_0;
         c.k.strides = {8 * 1024 * 144, 1024 * 144, 144, 1};
         return c;
       })},
      {.id = "CallMixedCacheFormats",
       .area = "attention call",
       .input = "k and v of one cache in different formats",
       .via = "FlashAttentionStep::validate",
       .field = "v",
       .fragment = "mixed formats within one cache: k 'k_cache' is bf16 but v 'v_cache' is f16",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({});
         c.k.dtype = DType::BF16;
         return c;
       })},
      {.id = "CallOverlappingCacheRows",
       .area = "attention call",
       .input = "cache rows closer together than head_dim",
       .via = "FlashAttentionStep::validate",
       .field = "k",
       .fragment = "rows of 'k_cache' are 64 elements apart but 128 wide: they overlap",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({});
         c.k.strides[2] = 64;
         return c;
       })},
      {.id = "CallPagedEntryPastPool",
       .area = "attention call",
       .input = "a paged cache whose block table names a page past the pool",
       .via = "FlashAttentionStep::validate",
       .field = "block_table",
       .fragment = "entry [1][2] is 8, past the pool of 8 pages (keys 32..44 of sequence 1 live there)",
       .action = attentionCall([] {
         // Two sequences of 45 keys in pages of 16: entries [b][0..2] are used, [b][3] never read.
         return test::withPages(test::shapeCall(test::decodeShape(2, 8, 2, 45, 64)), 16, 8,
                                {7, 6, 5, 99, 4, 3, 8, 99}, 4);
       })},
      {.id = "CallPagedLengthPastPages",
       .area = "attention call",
       .input = "a sequence length past the pages of its block-table row",
       .via = "FlashAttentionStep::validate",
       .field = "kv_len",
       .fragment = "kv_len 45 is past the pages: each row of the block table holds 2 pages of 16 tokens (32 keys)",
       .action = attentionCall([] {
         return test::withPages(test::shapeCall(test::decodeShape(2, 8, 2, 45, 64)), 16, 8, {0, 1, 2, 3}, 2);
       })},
      {.id = "CallPagedInt8CutBlocks",
       .area = "attention call",
       .input = "an int8 paged cache whose pages cut its blocks of 32 keys",
       .via = "FlashAttentionStep::validate",
       .field = "block_table",
       .fragment = "pages of 16 rows would cut int8 blocks of 32 keys; accepted: a page size that is a multiple of 32",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall(test::decodeShape(1, 8, 2, 45, 64));
         for (Tensor* t : {&c.k, &c.v}) {
           t->dtype = DType::I8;
           t->scales = std::make_shared<Tensor>(scalesShape(*t));
         }
         return test::withPages(c, 16);
       })},
      {.id = "CallPagedTableShape",
       .area = "attention call",
       .input = "a block table of the wrong type or batch",
       .via = "FlashAttentionStep::validate",
       .field = "block_table",
       .fragment = "'block_table' is f32[2, 3] contiguous; a block table is u32 [batch 2, max_pages]",
       .action = attentionCall([] {
         AttentionCall c = test::withPages(test::shapeCall(test::decodeShape(2, 8, 2, 45, 64)), 16);
         c.pages->blockTable.dtype = DType::F32;
         return c;
       })},
      {.id = "AppendPagedEntryPastPool",
       .area = "KV append",
       .input = "an append into a page past the pool",
       .via = "KvAppendStep::run",
       .field = "block_table",
       .fragment = "entry [0][1] is 9, past the pool of 9 pages (keys 16..17 of sequence 0 live there)",
       .action = pagedAppend(14, {0, 9, 2, 3, 4, 5, 6, 7})},
      {.id = "AppendPagedLengthPastPages",
       .area = "KV append",
       .input = "an append past the pages of a sequence's block-table row",
       .via = "KvAppendStep::run",
       .field = "block_table",
       .fragment = "sequence 0 needs 66 keys but its row of the block table holds 4 pages of 16 tokens (64 keys)",
       .action = pagedAppend(62, {0, 1, 2, 3, 4, 5, 6, 7})},
      {.id = "AppendPagedSharedPage",
       .area = "KV append",
       .input = "two sequences appending into one page",
       .via = "KvAppendStep::run",
       .field = "block_table",
       .fragment = "sequences 0 and 1 both write page 1",
       .action = pagedAppend(16, {0, 1, 2, 3, 4, 1, 6, 7})},
      {.id = "TensorNegativeDim",
       .area = "attention call",
       .input = "a negative dimension",
       .via = "Tensor::describe",
       .field = "k_cache",
       .fragment = "dimension -8 is negative in [1, -8, 64, 128]",
       .action =
           [](const InProcessContext&) {
             Tensor::describe("k_cache", DType::F16, {1, -8, 64, 128});
           }},
      {.id = "TensorBytesOverflow",
       .area = "attention call",
       .input = "a shape whose size overflows 64 bits",
       .via = "Tensor::describe",
       .field = "q",
       .fragment = "shape [1, 4294967296, 4294967296, 128] of f16 has more bytes than fit in 64 bits",
       .action =
           [](const InProcessContext&) {
             Tensor::describe("q", DType::F16, {1, 1ll << 32, 1ll << 32, 128});
           }},

      {.id = "CallLseOfAnotherShape",
       .area = "attention call",
       .input = "a log-sum-exp output whose shape is not the queries' rows",
       .via = "FlashAttentionStep::validate",
       .field = "lse",
       .fragment = "tensor 'lse' is f32[1, 32, 2] contiguous; the log-sum-exp output for q needs packed [1, 32, 1]",
       .action = attentionCall([] {
         AttentionCall c = test::shapeCall({});
         c.lse = Tensor::describe("lse", DType::F32, {1, 32, 2});
         return c;
       }),
       .cliPending = kMergeLibrary},

      // ---- Merges of partial attention results (MergeStep::validate).
      {.id = "MergeNoParts",
       .area = "attention merge",
       .input = "a merge of zero parts",
       .via = "MergeStep::validate",
       .field = "parts",
       .fragment = "no parts to merge: a merge takes one or more partial results",
       .action = merge([](MergeCall& c) { c.parts.clear(); }),
       .cliPending = kMergeLibrary},
      {.id = "MergePartsOfOtherShapes",
       .area = "attention merge",
       .input = "parts that cover different rows",
       .via = "MergeStep::validate",
       .field = "parts[1].o",
       .fragment = "part 1's output 'o1' has batch 1, n_heads 8, q_len 5, value_dim 64 but part 0's has batch 1, "
                   "n_heads 8, q_len 4, value_dim 64",
       .action = merge([](MergeCall& c) { c.parts[1].o = Tensor::describe("o1", DType::F16, {1, 8, 5, 64}, Layout::HeadMajor); }),
       .cliPending = kMergeLibrary},
      {.id = "MergeMixedDtypes",
       .area = "attention merge",
       .input = "an f16 part and an f32 part",
       .via = "MergeStep::validate",
       .field = "parts[1].o",
       .fragment = "mixed dtypes: part 0's output 'o0' is f16 but part 1's 'o1' is f32",
       .action = merge([](MergeCall& c) { c.parts[1].o.dtype = DType::F32; }),
       .cliPending = kMergeLibrary},
      {.id = "MergeLseNotF32",
       .area = "attention merge",
       .input = "a part's log-sum-exp in f16",
       .via = "MergeStep::validate",
       .field = "parts[0].lse",
       .fragment = "the log-sum-exp of [1, 8, 4] rows is f32 [1, 8, 4] packed",
       .action = merge([](MergeCall& c) { c.parts[0].lse.dtype = DType::F16; }),
       .cliPending = kMergeLibrary},
      {.id = "MergeOutputOfOtherShape",
       .area = "attention merge",
       .input = "a merged output with another value_dim",
       .via = "MergeStep::validate",
       .field = "o",
       .fragment = "the merged output 'merged' has batch 1, n_heads 8, q_len 4, value_dim 128 but the parts have",
       .action = merge([](MergeCall& c) { c.o = Tensor::describe("merged", DType::F16, {1, 8, 4, 128}, Layout::HeadMajor); }),
       .cliPending = kMergeLibrary},

      // ---- Device memory.
      {.id = "AllocationBeyondDeviceMemory",
       .area = "device",
       .input = "an allocation beyond device memory",
       .via = "Runtime::allocate",
       .kind = ErrorKind::Device,
       .fragment = "for 'k_cache' exceeds the device's",
       .action =
           [](const InProcessContext& ctx) {
             // A 32 GiB KV cache: [1, 8 heads, 2^24 tokens, 128] f16.
             ctx.runtime().allocate("k_cache", DType::F16, {1, 8, 1 << 24, 128}, Layout::KvCache);
           },
       .needsDevice = true},
  };
}

}  // namespace foundry::errors
