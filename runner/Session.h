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

#include <nlohmann/json_fwd.hpp>

#include "foundry/Error.h"
#include "runner/ModelConfig.h"

namespace foundry {

class Runtime;

enum class AttentionPath { Flash, Reference };

struct RunRequest {
  ModelConfig config;  ///< overrides already applied
  AttentionPath path = AttentionPath::Flash;
  bool check = false;  ///< compare sampled layers and tokens with the CPU and the materialised path
  std::optional<std::filesystem::path> inputs;  ///< safetensors with q, k, v: [layers, batch, tokens, heads, D]
  std::optional<std::filesystem::path> expect;  ///< safetensors with o: [layers, batch, tokens, heads, D]
  std::optional<std::filesystem::path> save;    ///< write o there (atomically)
  double tolerance = 0;  ///< relative to the largest |expected| output; 0: the dtype's bound
};

/// Where progress goes: a bar on a terminal, plain lines otherwise.
class Progress {
 public:
  virtual ~Progress() = default;
  virtual void update(const std::string& phase, std::uint64_t done, std::uint64_t total) = 0;
  virtual void finish() {}
};
std::unique_ptr<Progress> makeProgress(bool terminal);

struct PhaseReport {
  double gpuMicros = 0;        ///< attention work (RoPE, KV append, attention), from GPU timestamps
  double inputGpuMicros = 0;   ///< making the synthetic inputs, not part of the above
  double wallSeconds = 0;
  std::uint64_t tokens = 0;    ///< tokens processed (batch included)
};

struct CheckReport {
  bool ran = false;
  bool passed = true;
  std::size_t rows = 0;              ///< output rows compared with the CPU
  double maxRelVsCpu = 0;
  double maxRelVsMaterialised = 0;   ///< the sampled layers' prefill against SdpaReferenceStep
  double bound = 0;
  std::vector<std::string> failures;
};

/// An output a run could not write; what else the run produced stands.
struct OutputFailure {
  ErrorKind kind = ErrorKind::Device;
  std::string message;  ///< the error's one line, starting with the flag ("--save: cannot write ...")
};

struct RunReport {
  std::string model, device, driver, path;
  RunSpec run;
  std::uint32_t nHeads = 0, nKvHeads = 0, headDim = 0;
  std::vector<std::string> layerModifiers;  ///< per layer run, what modifiers it applied after the causal mask
  PhaseReport prefill, decode;
  std::map<std::string, std::uint64_t> kernels;  ///< kernel -> dispatches
  std::uint64_t peakDeviceBytes = 0;   ///< above what was held when the run started
  std::uint64_t cacheBytes = 0;        ///< the KV caches
  std::uint64_t scratchBytes = 0;      ///< Split-K partials or materialised scores
  std::uint64_t kernelCompiles = 0, kernelMemoryHits = 0, kernelDiskHits = 0, pipelines = 0;
  CheckReport check;
  std::optional<double> expectRelError;
  bool expectPassed = true;
  std::string savePath;                       ///< --save, when given
  std::optional<OutputFailure> saveFailure;   ///< why --save was not written; not thrown, so the report is kept

  bool passed() const { return check.passed && expectPassed; }
  nlohmann::json toJson() const;
  std::string summary() const;  ///< the tables `foundry run` prints
};

RunReport runModel(Runtime& runtime, const RunRequest& request, Progress& progress);

/// The relative error bound each dtype is checked against (docs/attention.md).
double defaultTolerance(DType dtype);

}  // namespace foundry
