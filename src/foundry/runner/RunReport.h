#pragma once
// What `foundry run` reports: the run's provenance (version, time, config, knobs and where each came
// from), the Selector's decisions with their reasons, GPU time per phase, memory, kernels and the
// check. docs/report.md documents every field of the JSON form.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "foundry/Error.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/steps/Options.h"
#include "foundry/steps/Selector.h"

namespace foundry {

struct PhaseReport {
  double gpuMicros = 0;        ///< attention work (RoPE, KV append, attention), from GPU timestamps
  double inputGpuMicros = 0;   ///< making the synthetic inputs, not part of the above
  double wallSeconds = 0;
  std::uint64_t tokens = 0;    ///< tokens processed (batch included)
  /// Decode with FOUNDRY_DECODE_REPLAY: command buffers recorded and replays of them (both 0: the
  /// dispatches were recorded token by token).
  std::uint64_t recordings = 0, replays = 0;
  std::string rerecorded;      ///< why the last new recording was made after the first (empty: none)
};

struct CheckReport {
  bool ran = false;
  bool passed = true;
  std::size_t rows = 0;              ///< output rows compared with the CPU
  double maxRelVsCpu = 0;            ///< +Inf where a NaN or Inf did not match
  double maxRelVsMaterialised = 0;   ///< the sampled layers' prefill against SdpaReferenceStep
  bool materialisedRan = false;      ///< that comparison ran (not for ragged prompts or oversized scores)
  double bound = 0;
  std::vector<std::string> failures;  ///< per sampled layer and token: how many, the first where
};

/// One rank of a run over several (`mpirun -np N foundry run`): the positions it held, and its share of
/// the ring prefill and the context-parallel decode over the whole run.
struct RankReport {
  std::uint32_t begin = 0, end = 0;      ///< positions [begin, end) of every sequence it held
  double prefillAttentionMicros = 0;     ///< its ring attention (GPU time), every layer
  double prefillWaitMicros = 0;          ///< waiting for blocks after its attention was done (wall)
  double prefillMergeMicros = 0;         ///< merging its blocks' partials (GPU time)
  std::uint64_t prefillBytesSent = 0;    ///< key/value blocks it passed on
  double decodeAttentionMicros = 0;      ///< its partial decode attention (GPU time)
  double decodeGatherMicros = 0;         ///< in the gather of the partials, waiting for the slowest (wall)
  std::uint64_t decodeBytesSent = 0;     ///< its partial outputs and LSEs
};

struct RanksReport {
  std::vector<RankReport> ranks;
  double decodeMergeMicros = 0;  ///< rank 0's merges of the partials (GPU time)
  std::uint64_t bytesMoved() const;
};

/// An output a run could not write; what else the run produced stands.
struct OutputFailure {
  ErrorKind kind = ErrorKind::Device;
  std::string message;  ///< the error's one line, starting with the flag ("--save: cannot write ...")
};

/// What the Selector decided for one kind of call, and why: the same for every call with these kernels.
struct SelectorReport {
  std::string phase;                 ///< "prefill" or "decode"
  std::vector<std::string> kernels;  ///< the kernels the calls recorded, in order
  std::vector<Decision> decisions;   ///< each with its reason
};

/// One knob in effect, and where its value came from.
struct KnobReport {
  std::string name;    ///< FOUNDRY_...
  std::string value;
  std::string source;  ///< "default", "environment", "/tuning/<key>" (the config) or the flag
};

/// The version of the JSON report's layout (docs/report.md); raised when a field changes meaning or
/// goes away, not when one is added.
inline constexpr int kRunReportVersion = 2;

struct RunReport {
  std::string foundryVersion;  ///< FOUNDRY_VERSION of the build that ran
  std::string timestamp;       ///< when the run started, UTC, ISO 8601
  std::string configPath;
  std::string model, device, driver, path;
  std::vector<KnobReport> knobs;        ///< every knob, in the table's order
  std::vector<SelectorReport> selector; ///< per distinct kind of call, in the order first recorded
  RunSpec run;
  std::uint32_t nHeads = 0, nKvHeads = 0, headDim = 0, valueDim = 0;
  bool latentValues = false;
  std::vector<std::string> layerModifiers;  ///< per layer run, what modifiers it applied after the causal mask
  PhaseReport prefill, decode;
  std::map<std::string, std::uint64_t> kernels;  ///< kernel -> dispatches
  std::uint64_t peakDeviceBytes = 0;   ///< above what was held when the run started
  std::uint64_t cacheBytes = 0;        ///< the KV caches
  /// K and V bytes one token adds over the run's layers (what a decode step reads per cached token).
  std::uint64_t kvBytesPerToken = 0;
  std::uint64_t scratchBytes = 0;      ///< Split-K partials or materialised scores
  std::uint64_t kernelCompiles = 0, kernelMemoryHits = 0, kernelDiskHits = 0, pipelines = 0;
  CheckReport check;
  std::optional<RanksReport> ranks;  ///< a run over several ranks
  std::optional<double> expectRelError;  ///< +Inf where a NaN or Inf did not match
  bool expectPassed = true;
  std::string expectFailure;  ///< what did not match --expect: how many, the first where
  std::string savePath;                       ///< --save, when given
  std::optional<OutputFailure> saveFailure;   ///< why --save was not written; not thrown, so the report is kept

  bool passed() const { return check.passed && expectPassed; }
  nlohmann::json toJson() const;
  std::string summary() const;  ///< the tables `foundry run` prints
  /// Why the run failed, for the one error line: "the outputs do not match --expect: ..." (empty if passed).
  std::string failure() const;
};

/// Every knob of `options` with its value and source, for a report.
std::vector<KnobReport> knobReport(const Options& options);

/// The current time, UTC, as "2025-01-31T12:00:00Z".
std::string utcTimestamp();

}  // namespace foundry
