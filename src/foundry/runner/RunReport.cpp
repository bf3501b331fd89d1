#include "foundry/runner/RunReport.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace foundry {

std::vector<KnobReport> knobReport(const Options& options) {
  std::vector<KnobReport> out;
  for (const auto& [name, value] : options.describe()) out.push_back({name, value, options.sourceOf(name)});
  return out;
}

std::string utcTimestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

nlohmann::json RunReport::toJson() const {
  nlohmann::json j;
  j["report_version"] = kRunReportVersion;
  j["foundry_version"] = foundryVersion;
  j["timestamp"] = timestamp;
  j["config"] = configPath.empty() ? nlohmann::json(nullptr) : nlohmann::json(configPath);
  j["model"] = model;
  j["device"] = device;
  j["driver"] = driver;
  j["path"] = path;
  j["run"] = {{"batch", run.batch}, {"prompt_len", run.promptLen}, {"decode_tokens", run.decodeTokens},
              {"layers", run.layers}, {"dtype", dtypeName(run.dtype)}, {"kv_dtype", dtypeName(run.cacheType())},
              {"seed", run.seed}, {"page_size", run.pageSize}, {"prompt_lens", run.promptLens}};
  j["knobs"] = nlohmann::json::array();
  for (const auto& k : knobs) j["knobs"].push_back({{"name", k.name}, {"value", k.value}, {"source", k.source}});
  j["selector"] = nlohmann::json::array();
  for (const auto& s : selector) {
    nlohmann::json decisions = nlohmann::json::array();
    for (const auto& d : s.decisions) decisions.push_back({{"what", d.what}, {"value", d.value}, {"reason", d.reason}});
    j["selector"].push_back({{"phase", s.phase}, {"kernels", s.kernels}, {"decisions", decisions}});
  }
  j["layout"] = {{"n_heads", nHeads}, {"n_kv_heads", nKvHeads}, {"head_dim", headDim}, {"value_dim", valueDim},
                 {"latent_values", latentValues}};
  j["modifiers"] = nlohmann::json::array();
  for (std::size_t l = 0; l < layerModifiers.size(); ++l) {
    j["modifiers"].push_back({{"layer", l}, {"modifiers", layerModifiers[l]}});
  }
  auto phase = [&](const PhaseReport& p) {
    return nlohmann::json{{"gpu_us", p.gpuMicros},
                          {"input_gpu_us", p.inputGpuMicros},
                          {"wall_s", p.wallSeconds},
                          {"tokens", p.tokens},
                          {"gpu_us_per_layer", run.layers ? p.gpuMicros / run.layers : 0.0},
                          {"tokens_per_s", p.gpuMicros > 0 ? nlohmann::json(p.tokens / (p.gpuMicros * 1e-6))
                                                           : nlohmann::json(nullptr)}};
  };
  j["prefill"] = phase(prefill);
  j["decode"] = phase(decode);
  j["decode"]["recordings"] = decode.recordings;
  j["decode"]["replays"] = decode.replays;
  j["kernels"] = kernels;
  j["memory"] = {{"peak_bytes", peakDeviceBytes}, {"kv_cache_bytes", cacheBytes}, {"kv_bytes_per_token", kvBytesPerToken},
                 {"scratch_bytes", scratchBytes}};
  j["kernel_cache"] = {{"compiles", kernelCompiles}, {"memory_hits", kernelMemoryHits}, {"disk_hits", kernelDiskHits},
                       {"pipelines_created", pipelines}};
  if (check.ran) {
    j["check"] = {{"passed", check.passed}, {"rows", check.rows}, {"max_rel_vs_cpu", check.maxRelVsCpu},
                  {"max_rel_vs_materialised",
                   check.materialisedRan ? nlohmann::json(check.maxRelVsMaterialised) : nlohmann::json(nullptr)},
                  {"bound", check.bound},
                  {"failures", check.failures}};
  }
  if (ranks) {
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t r = 0; r < ranks->ranks.size(); ++r) {
      const RankReport& x = ranks->ranks[r];
      list.push_back({{"rank", r}, {"positions", {x.begin, x.end}},
                      {"prefill", {{"attention_gpu_us", x.prefillAttentionMicros}, {"wait_us", x.prefillWaitMicros},
                                   {"merge_gpu_us", x.prefillMergeMicros}, {"bytes_sent", x.prefillBytesSent}}},
                      {"decode", {{"attention_gpu_us", x.decodeAttentionMicros}, {"gather_us", x.decodeGatherMicros},
                                  {"bytes_sent", x.decodeBytesSent}}}});
    }
    j["ranks"] = {{"count", ranks->ranks.size()}, {"per_rank", list},
                  {"decode_merge_gpu_us", ranks->decodeMergeMicros}, {"bytes_moved", ranks->bytesMoved()}};
  }
  if (expectRelError) {
    j["expect"] = {{"passed", expectPassed}, {"max_rel", *expectRelError}, {"failure", expectFailure}};
  }
  if (!savePath.empty()) {
    j["save"] = {{"path", savePath}, {"written", !saveFailure}};
    if (saveFailure) j["save"]["error"] = saveFailure->message;
  }
  j["passed"] = passed();
  return j;
}

std::uint64_t RanksReport::bytesMoved() const {
  std::uint64_t n = 0;
  for (const auto& r : ranks) n += r.prefillBytesSent + r.decodeBytesSent;
  return n;
}

std::string RunReport::failure() const {
  if (!check.passed) {
    const std::string first = check.failures.empty() ? "" : ": " + check.failures.front();
    const std::size_t more = check.failures.empty() ? 0 : check.failures.size() - 1;
    return fmt::format("the outputs fail the check against the reference{}{}", first,
                       more ? fmt::format(" (and {} more sampled failure{})", more, more == 1 ? "" : "s") : "");
  }
  if (!expectPassed) return "the outputs do not match --expect: " + expectFailure;
  return "";
}

std::string RunReport::summary() const {
  std::string s = fmt::format("{} on {} ({} path): batch {}, prompt {}, {} decode tokens, {} layers, {}{}\n", model,
                              device, path, run.batch,
                              run.promptLens.empty() ? std::to_string(run.promptLen)
                                                     : fmt::format("lengths {}", fmt::join(run.promptLens, "/")),
                              run.decodeTokens, run.layers,
                              run.cacheType() == run.dtype ? std::string(dtypeName(run.dtype))
                                                           : fmt::format("{}, {} KV cache", dtypeName(run.dtype),
                                                                         dtypeName(run.cacheType())),
                              run.pageSize ? fmt::format(", pages of {}", run.pageSize) : "");
  if (valueDim && valueDim != headDim) {
    s += fmt::format("  head_dim {}, value_dim {}{}{}\n", headDim, valueDim,
                     latentValues ? " (the values are the last columns of each latent key row)" : "",
                     path == "flash" ? "; the prefill is materialised (the flash prefill takes one row width)" : "");
  }
  s += fmt::format("  {:<8} {:>12} {:>16} {:>14} {:>10}\n", "phase", "GPU ms", "ms per layer", "tokens/s (GPU)", "wall s");
  for (const auto& [name, p] : {std::pair<const char*, const PhaseReport*>{"prefill", &prefill}, {"decode", &decode}}) {
    const std::string rate = p->gpuMicros > 0 ? fmt::format("{:.0f}", p->tokens / (p->gpuMicros * 1e-6)) : "n/a";
    s += fmt::format("  {:<8} {:>12.3f} {:>16.4f} {:>14} {:>10.2f}\n", name, p->gpuMicros / 1e3,
                     run.layers ? p->gpuMicros / 1e3 / run.layers : 0.0, rate, p->wallSeconds);
  }
  if (decode.recordings > 0) {
    s += fmt::format("  decode replay: {} recorded, {} replayed{}\n", decode.recordings, decode.replays,
                     decode.rerecorded.empty() ? "" : " (recorded again: " + decode.rerecorded + ")");
  }
  // Layers with the same modifiers on one line: "layers 0, 2: sliding window 128 + sinks".
  std::vector<std::pair<std::string, std::vector<std::size_t>>> groups;
  for (std::size_t l = 0; l < layerModifiers.size(); ++l) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == layerModifiers[l]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {layerModifiers[l], {}});
    it->second.push_back(l);
  }
  s += "  modifiers (after the causal mask):\n";
  for (const auto& [mods, layers] : groups) {
    s += fmt::format("    layer{} {}: {}\n", layers.size() > 1 ? "s" : "", fmt::join(layers, ", "), mods);
  }
  s += "  kernels:\n";
  for (const auto& [k, n] : kernels) s += fmt::format("    {:>6} x {}\n", n, k);
  s += fmt::format("  device memory: peak {:.1f} MiB above the start (KV caches {:.1f} MiB, {} bytes per token; scratch "
                   "{:.1f} MiB)\n", peakDeviceBytes / 1048576.0, cacheBytes / 1048576.0, kvBytesPerToken,
                   scratchBytes / 1048576.0);
  s += fmt::format("  kernel cache: {} compiled, {} from disk, {} from memory; {} pipelines created\n", kernelCompiles,
                   kernelDiskHits, kernelMemoryHits, pipelines);
  if (ranks) {
    s += fmt::format("  {} ranks: ring prefill, context-parallel decode; {:.1f} MiB moved, decode merges {:.3f} ms "
                     "(GPU, rank 0)\n", ranks->ranks.size(), ranks->bytesMoved() / 1048576.0,
                     ranks->decodeMergeMicros / 1e3);
    s += fmt::format("    {:<5} {:>17} {:>14} {:>12} {:>13} {:>14} {:>13} {:>12}\n", "rank", "positions",
                     "prefill ms", "wait ms", "sent MiB", "decode ms", "gather ms", "sent KiB");
    for (std::size_t r = 0; r < ranks->ranks.size(); ++r) {
      const RankReport& x = ranks->ranks[r];
      s += fmt::format("    {:<5} {:>17} {:>14.3f} {:>12.3f} {:>13.2f} {:>14.3f} {:>13.3f} {:>12.1f}\n", r,
                       fmt::format("[{}, {})", x.begin, x.end), x.prefillAttentionMicros / 1e3,
                       x.prefillWaitMicros / 1e3, x.prefillBytesSent / 1048576.0, x.decodeAttentionMicros / 1e3,
                       x.decodeGatherMicros / 1e3, x.decodeBytesSent / 1024.0);
    }
  }
  if (check.ran) {
    s += fmt::format("  check: {} ({} rows, max relative error {:.2e} vs the CPU, {}, bound {:.2g})\n",
                     check.passed ? "passed" : "FAILED", check.rows, check.maxRelVsCpu,
                     check.materialisedRan ? fmt::format("{:.2e} vs the materialised path", check.maxRelVsMaterialised)
                                           : std::string("no materialised comparison"),
                     check.bound);
    for (const auto& f : check.failures) s += "    " + f + "\n";
  }
  if (expectRelError) {
    s += fmt::format("  expected outputs: {} (max relative error {:.2e})\n", expectPassed ? "matched" : "MISMATCH",
                     *expectRelError);
    if (!expectPassed) s += "    " + expectFailure + "\n";
  }
  return s;
}

}  // namespace foundry
