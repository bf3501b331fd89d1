#include "foundry/runner/RunMemory.h"

#include <initializer_list>
#include <limits>

#include <fmt/format.h>

#include "foundry/KvQuant.h"
#include "foundry/steps/SdpaReferenceStep.h"

namespace foundry {

namespace {

// Products saturate: a config whose bytes overflow 64 bits needs more than any device anyway.
std::uint64_t product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t n = 1;
  for (const auto f : factors) {
    if (__builtin_mul_overflow(n, f, &n)) return std::numeric_limits<std::uint64_t>::max();
  }
  return n;
}

}  // namespace

MemoryPlan runMemoryPlan(const RunRequest& req, const RunFileBytes& files, const DeviceInfo& device,
                         std::optional<std::uint32_t> cacheRows) {
  const ModelConfig& c = req.config;
  const RunSpec& r = c.run;
  const std::uint64_t T = std::uint64_t(r.promptLen) + r.decodeTokens, L = r.layers, B = r.batch;
  const std::uint64_t dt = dtypeBytes(r.dtype);
  // One layer's tensors as the device holds them: [tokens, batch, heads, head_dim or value_dim]; latent
  // values are the keys' own columns.
  const std::uint64_t q = product({T, B, c.nHeads, c.headDim, dt}), o = product({T, B, c.nHeads, c.vDim(), dt});
  const std::uint64_t kv = product({T, B, c.nKvHeads, c.headDim + (c.latentValues ? 0 : c.vDim()), dt});
  // A paged cache holds whole pages: each sequence's rows rounded up to its last page.
  const std::uint64_t rows = cacheRows ? *cacheRows : r.pageSize ? (T + r.pageSize - 1) / r.pageSize * r.pageSize : T;
  const std::uint64_t kCache = cacheBytes(r.cacheType(), rows * B * c.nKvHeads, c.headDim);
  const std::uint64_t vCache = c.latentValues ? 0 : cacheBytes(r.cacheType(), rows * B * c.nKvHeads, c.vDim());
  const bool keepOutputs = req.check || req.expect || req.save;
  const std::uint64_t inputSets = req.inputs ? L : 1, outputs = keepOutputs ? L : 1;

  MemoryPlan plan;
  // Largest buffers first, named as Session names them, so a single one too large for the device is
  // reported as it would be when allocated.
  plan.device.push_back({"k_cache0", kCache, true});
  if (vCache) plan.device.push_back({"v_cache0", vCache, true});
  plan.device.push_back({fmt::format("KV caches of the other {} layers", L - 1), product({kCache + vCache, L - 1})});
  plan.device.push_back({"o0", o, true});
  plan.device.push_back({"other outputs", product({o, outputs - 1})});
  plan.device.push_back({req.inputs ? "q0" : "q_in", q, true});
  plan.device.push_back({"other inputs", product({q, inputSets - 1}) + product({kv, inputSets})});
  if (req.check) plan.device.push_back({"the check's q and o", q + o});
  // The materialised path's O(prompt^2) scores, in one buffer: larger ones the step itself refuses.
  const std::uint64_t scores = SdpaReferenceStep::scratchBytes(
      {r.batch, c.nHeads, c.nKvHeads, r.promptLen, r.promptLen, r.promptLen, c.headDim, r.dtype});
  const bool materialisedPrefill = req.path == AttentionPath::Reference || c.vDim() != c.headDim;
  if ((materialisedPrefill || req.check) && scores <= device.maxStorageBufferRange) {
    plan.device.push_back({"materialised scores", scores});
  }

  // Host: one layer's inputs as floats (and their rounding copy) for the check and for --inputs.
  const std::uint64_t layerFloats = (q + kv) / dt * 4;
  const std::uint64_t outputFloats = product({L, o / dt, 4});
  if (req.inputs) plan.host.push_back({"--inputs tensors", files.inputs});
  if (req.inputs || req.check) plan.host.push_back({"one layer's inputs as floats", 2 * layerFloats});
  if (req.check) plan.host.push_back({"one layer's outputs for the check", 2 * o / dt * 4});
  if (req.expect || req.save) plan.host.push_back({"the outputs as floats", product({2, outputFloats})});
  if (req.expect) plan.host.push_back({"--expect tensor o and its copies", files.expect + product({outputFloats, 3})});
  if (req.save) plan.host.push_back({"the --save file", product({L, o})});
  plan.remedy = "lower --batch (/run/batch), --prompt-len or --decode-tokens (/run/prompt_len, /run/decode_tokens) "
                "or --layers (/run/layers)";
  return plan;
}

}  // namespace foundry
