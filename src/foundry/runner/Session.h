#pragma once
// `foundry run`: a model's attention run end to end as an inference engine would — per layer a KV
// cache, a prefill (RoPE on Q, KV append with RoPE on K, attention) and then the decode loop (KV
// append, fused RoPE -> decode) — with a report of GPU time, memory and the kernels used.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foundry/runner/ModelConfig.h"
#include "foundry/runner/Progress.h"
#include "foundry/runner/RunReport.h"
#include "foundry/steps/AttentionOptions.h"

namespace foundry {

class Runtime;
class Communicator;

enum class AttentionPath { Flash, Reference };

struct RunRequest {
  ModelConfig config;  ///< overrides already applied
  AttentionPath path = AttentionPath::Flash;
  bool check = false;  ///< compare sampled layers and tokens with the CPU and the materialised path
  std::optional<std::filesystem::path> inputs;  ///< safetensors with q, k, v: [layers, batch, tokens, heads, D]
  std::optional<std::filesystem::path> expect;  ///< safetensors with o: [layers, batch, tokens, heads, D]
  std::optional<std::filesystem::path> save;    ///< write o there (atomically)
  double tolerance = 0;  ///< relative to the largest |expected| output; 0: the dtype's bound
  std::string configPath;  ///< where the config was read from, for the report (empty: built in code)
  AttentionOptions attention;  ///< the attention knobs (the runtime's are the Runtime's own)
  /// The ranks of a run over several processes (mpirun): with more than one, each holds a range of the
  /// positions (docs/distributed.md); rank 0's report has every output and the check.
  Communicator* ranks = nullptr;
};

RunReport runModel(Runtime& runtime, const RunRequest& request, Progress& progress);

/// The relative error bound each dtype is checked against (docs/attention.md).
double defaultTolerance(DType dtype);

}  // namespace foundry
