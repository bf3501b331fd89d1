// Rows for what `foundry run` reads and compares beyond the format checks of RunRows.cpp:
// - NaN and Inf against --check and --expect: a non-finite value on either side is a mismatch unless
//   the other side holds the same one, and the error line says how many and where the first is;
// - safetensors files read lazily: the header is checked whole, then only q, k, v (or o) are read, so
//   a huge tensor the run does not use is never read and a wrongly shaped one is refused unread;
// - the memory a run needs, checked against the device's heap before the first allocation.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"
#include "foundry/runner/io/Safetensors.h"

namespace foundry::errors {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kInputs = "{tmp}/inputs.safetensors", kExpected = "{tmp}/expected.safetensors";

/// The outputs a kSmall run saves, with `change` applied, written back as F32 (which keeps NaN and Inf).
void writeChangedOutputs(const CliContext& ctx, const std::function<void(std::vector<float>&)>& change) {
  ctx.foundry(runTiny({"--save", kExpected}), {});
  const auto saved = readSafetensors(ctx.tmp / "expected.safetensors");
  std::vector<float> o = saved.floats("o");
  change(o);
  const std::vector<NamedTensor> changed = {{"o", saved.tensor("o").shape, o}};
  writeSafetensors(ctx.tmp / "expected.safetensors", changed, DType::F32);
}

/// A header entry: "name":{"dtype":...,"shape":[...],"data_offsets":[begin,end]}.
std::string headerEntry(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape,
                        std::uint64_t begin, std::uint64_t end) {
  const std::string object = json{{name, {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}}}}.dump();
  return object.substr(1, object.size() - 2);
}

/// A file of zero-valued F16 q, k, v with `qShape` for q, plus `extra` (header entries placed after
/// them), whose data is `extraBytes` long; the file is extended without writing, so large tensors are
/// sparse and cost no disk.
void writeSparseInputs(const fs::path& p, const std::vector<std::int64_t>& qShape, std::uint64_t extraBytes,
                       const std::function<std::string(std::uint64_t)>& extra) {
  std::uint64_t offset = 0;
  std::string header = "{";
  for (const auto& [name, shape] : {std::pair<std::string, std::vector<std::int64_t>>{"q", qShape}, {"k", kKvShape},
                                    {"v", kKvShape}}) {
    std::uint64_t bytes = 2;
    for (const auto d : shape) bytes *= static_cast<std::uint64_t>(d);
    if (offset) header += ',';
    header += headerEntry(name, "F16", shape, offset, offset + bytes);
    offset += bytes;
  }
  if (extra) header += ',' + extra(offset);
  header += '}';
  writeBytes(p, safetensors(header, 0));
  fs::resize_file(p, fs::file_size(p) + offset + extraBytes);
}

}  // namespace

std::vector<CliRow> inputRows() {
  constexpr std::uint64_t kGiB = 1ull << 30;
  std::vector<CliRow> rows = {
      // ---- NaN and Inf in what is compared.
      {.id = "RunExpectGoldenAllNaN",
       .area = "expected outputs",
       .input = "`--expect` of a golden file full of NaN",
       .args = runTiny({"--expect", kExpected}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeChangedOutputs(ctx, [](std::vector<float>& o) { std::fill(o.begin(), o.end(), NAN); });
           },
       .exitCode = 1,
       .fragment = "the outputs do not match --expect: 6144 non-finite mismatches, the first at o[layer 0, batch 0, "
                   "token 0, head 0, d 0] (got ",
       .note = "a NaN in the reference is a mismatch, not a skipped element"},
      {.id = "RunExpectInfVsFinite",
       .area = "expected outputs",
       .input = "`--expect` with +Inf at one element where the run gives a number",
       .args = runTiny({"--expect", kExpected}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeChangedOutputs(ctx, [](std::vector<float>& o) { o[100] = INFINITY; });
           },
       .exitCode = 1,
       .fragment = "the outputs do not match --expect: 1 non-finite mismatch, the first at o[layer 0, batch 0, "
                   "token 0, head 1, d 36] (got ",
       .note = "an Inf in the reference neither matches a number nor widens the relative scale"},
      {.id = "RunCheckNaNInputs",
       .area = "expected outputs",
       .input = "`--check` of `--inputs` with NaN in one query element",
       .args = runTiny({"--inputs", kInputs, "--check"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             std::vector<float> q(3 * 32 * 64, 0.25f), kv(3 * 4 * 64, 0.5f);
             q[0] = NAN;
             const std::vector<NamedTensor> inputs = {{"q", kQShape, q}, {"k", kKvShape, kv}, {"v", kKvShape, kv}};
             writeSafetensors(ctx.tmp / "inputs.safetensors", inputs, DType::F32);
           },
       .exitCode = 1,
       .fragment = "the outputs fail the check against the reference: layer 0 sequence 0 position 0 vs the CPU: 64 outputs are "
                   "NaN or Inf where the reference is too, the first at o[head 0, d 0]",
       .note = "the kernels give the query's row NaN, as the float64 reference does (PyTorch's softmax); a check "
               "that both sides are NaN vouches for nothing, so it fails"},

      // ---- safetensors files: the header first, then only the tensors the run uses.
      {.id = "RunInputsHugeUnusedTensor",
       .area = "safetensors",
       .input = "`--inputs` that also holds a 64 GiB tensor the run does not use (a sparse file)",
       .args = runTiny({"--inputs", kInputs, "--no-check"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeSparseInputs(ctx.tmp / "inputs.safetensors", kQShape, 64 * kGiB, [](std::uint64_t at) {
               return headerEntry("unused", "F32", {16 * std::int64_t(kGiB)}, at, at + 64 * kGiB);
             });
           },
       .exitCode = 0,
       .fragment = "kernel cache:",
       .note = "runs; only q, k and v are read",
       .quiet = true},
      {.id = "RunInputsUnusedTensorPastEnd",
       .area = "safetensors",
       .input = "`--inputs` whose unused tensor's offsets run past the end of the file",
       .args = runTiny({"--inputs", kInputs}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeSparseInputs(ctx.tmp / "inputs.safetensors", kQShape, 0, [](std::uint64_t at) {
               return headerEntry("unused", "F32", {16 * std::int64_t(kGiB)}, at, at + 64 * kGiB);
             });
           },
       .exitCode = 2,
       .fragment = "/unused/data_offsets: tensor \"unused\": offsets [15360, 68719492096) run past the end of the "
                   "data (15360 bytes) (in {tmp}/inputs.safetensors)",
       .note = "the whole header is checked against the file, used tensors or not"},
      {.id = "RunInputsBigWrongShape",
       .area = "safetensors",
       .input = "`--inputs` whose q is 24 GiB of the wrong shape (a sparse file)",
       .args = runTiny({"--inputs", kInputs}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeSparseInputs(ctx.tmp / "inputs.safetensors", {1, 1, 3, 32, 1 << 27}, 0, {});
           },
       .exitCode = 2,
       .fragment = "--inputs: tensor 'q' in {tmp}/inputs.safetensors has shape [1, 1, 3, 32, 134217728]; this run "
                   "needs [1, 1, 3, 32, 64]",
       .note = "refused from the header within 2 s; none of the 24 GiB is read",
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         return o.seconds < 2 ? "" : fmt::format("took {:.2f} s: was the tensor read?", o.seconds);
       }},

      // ---- The memory a run needs, before the first allocation.
      {.id = "RunBeyondDeviceHeap",
       .area = "device",
       .input = "a config whose buffers together exceed the device's heap (160 layers, 65,536 tokens, batch 8)",
       .args = {"run", "{tmp}/model.json"},
       .setup =
           [](const CliContext& ctx) {
             json c = baseConfig();
             c["attention"] = {{"layers", 160}, {"n_heads", 8}, {"n_kv_heads", 8}, {"head_dim", 128},
                               {"max_context", 65536}};
             c["run"] = {{"batch", 8}, {"prompt_len", 65528}, {"decode_tokens", 8}, {"dtype", "f16"}, {"check", false}};
             writeBytes(ctx.tmp / "model.json", c.dump(2));
           },
       .exitCode = 4,
       .fragment = "this run needs 347892350976 bytes (324.00 GiB) of device memory (k_cache0 1.00 GiB, v_cache0 "
                   "1.00 GiB, KV caches of the other 159 layers 318.00 GiB, o0 1.00 GiB, q_in 1.00 GiB, other inputs "
                   "2.00 GiB) but the largest heap of ",
       .note = "before any allocation; the line ends with the heap's size and `lower --batch (/run/batch), "
               "--prompt-len or --decode-tokens (/run/prompt_len, /run/decode_tokens) or --layers (/run/layers)`",
       .check = [](const CliContext&, const CliOutcome& o) -> std::string {
         return o.err.find("; lower --batch (/run/batch), --prompt-len or --decode-tokens (/run/prompt_len, "
                           "/run/decode_tokens) or --layers (/run/layers)") == std::string::npos
                    ? "the line does not say what to lower"
                    : "";
       }},
  };
  return rows;
}

}  // namespace foundry::errors
