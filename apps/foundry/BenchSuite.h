#pragma once
// The benchmark suite: attention shapes timed on GPU timestamps around each call's kernel sequence
// (the Split-K reduce included), after warm-up, median of N runs, with a cold L2 (inputs rotate among
// copies totalling more than four times the L2). Each shape's output is checked against the CPU
// float64 reference on sampled rows before it is timed. The `ceilings` suite measures the device's
// read bandwidth and cooperative-matrix rate with kernels built by the framework.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foundry/Runtime.h"
#include "foundry/stages/CeilingStages.h"
#include "foundry/stages/PrefillProbe.h"
#include "foundry/steps/AttentionCall.h"
#include "foundry/steps/AttentionOptions.h"

namespace foundry::bench {

struct Shape {
  std::string kind;  ///< "decode" or "prefill"
  std::uint32_t batch = 1, heads = 32, kvHeads = 8, qLen = 1, kvLen = 1024, headDim = 128;
  bool causal = true;
  /// Modifiers after the causal mask: "window<W>" (Hugging Face's sliding_window), "softcap<C>",
  /// "alibi", "sinks"; and the storage: "bf16" (q, K/V and o in bf16 instead of f16), "kvtok" (a
  /// token-major cache [B, S, Hkv, D] instead of head-major), "int8" or "q8_0" (a quantized cache),
  /// "pg<N>" (a paged cache: pages of N rows in a pool, each sequence's pages in a shuffled order).
  std::vector<std::string> modifiers;
  DType dtype() const;      ///< of q and o: f16, or bf16 with "+bf16"
  DType cacheType() const;  ///< of K/V: dtype(), or int8 / q8_0 with "+int8" / "+q8_0"
  bool kvTokenMajor() const;
  std::uint32_t pageSize() const;  ///< rows per page with "+pg<N>", else 0
  std::string name() const;
  double flops() const;        ///< of the visible (query, key) pairs: causal prefill counts half, as torch_sdpa.py does
  double kvBytes() const;      ///< K and V bytes read (in the cache's format): a window's keys only
  std::uint32_t window() const;  ///< the window's size, or 0
};

struct Options {
  std::string suite = "all";                ///< decode, prefill, ceilings, all, smoke
  std::uint32_t runs = 20;                  ///< at least this many timed calls
  std::uint32_t warmup = 5;                 ///< at least this many untimed calls first
  double warmupMicros = 500000;             ///< and at least this much GPU time first (clocks ramp up)
  double warmupSeconds = 1.0;               ///< and at least this long
  double minTimedMicros = 50000;            ///< timed calls continue until this much GPU time
  bool queueAhead = true;                   ///< queue each batch before waiting for the one ahead
  std::uint64_t l2Bytes = 64ull << 20;      ///< inputs rotate over more than 4x this
  std::uint32_t checkRows = 48;             ///< sampled output rows checked per shape
  AttentionOptions knobs;                   ///< the attention knobs a suite runs with
};

struct Ceilings {
  std::optional<double> readGBs;    ///< nullopt when not measured
  std::optional<double> mmaTflops;  ///< nullopt when the device has no cooperative matrices
  /// The floor under any call: one dispatch of one workgroup that does nothing, and two such
  /// dispatches with a barrier between (a Split-K part kernel, then its reduce), in microseconds.
  double emptyDispatchUs = 0;
  double dependentPairUs = 0;
};

/// A read stream's geometry for `bench --read-scan MIB:GROUPS:WORKGROUP:LOADS[:blocked[:SPLIT:SIDES]|:ring|:cm2]`:
/// how fast a buffer of that size streams with that grid, workgroup size and loads in flight a lane, in
/// ReadStreamStage's order (cm2: each workgroup's share in workgroup-scope coopmat2 tensor loads of 64
/// rows of 128 f16, LOADS tiles at once: CoopMat2ReadStage).
struct ReadScan {
  std::uint64_t mib = 0;
  std::uint32_t groups = 0, workgroup = 0, loads = 0;
  ReadStreamStage::Order order = ReadStreamStage::Order::Grid;
  bool coopMat2 = false;
  /// blocked only: a workgroup's share cut into `split` parts, one per group of its invocations; each
  /// part cut into `sides` read side by side by every lane (2: as a decode subgroup reads K and V).
  std::uint32_t split = 1, sides = 1;
  std::string name() const;
};
ReadScan parseReadScan(const std::string& text);

struct Result {
  Shape shape;
  double medianUs = 0, minUs = 0;
  /// The GPU time of the timed batches over their calls: the median's check against timestamps that
  /// start a call before the one ahead of it ends.
  double batchUs = 0;
  double tflops = 0, kvGBs = 0;
  /// decode: of the read ceiling; prefill: of the MMA ceiling; nullopt where that ceiling was not
  /// measured. Over 100 where the data came from a cache faster than the cold read stream.
  std::optional<double> percentOfCeiling;
  std::string ceiling;  ///< which ceiling percentOfCeiling is of: "read" or "mma"
  double relError = 0;
  bool checked = false;
  std::uint32_t copies = 1;
  std::vector<std::string> kernels;
  std::string plan;
  std::string variant;  ///< the sweep's name for the knob set, or empty
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> statistics;  ///< per kernel, from the driver
  std::optional<probe::Summary> probe;  ///< with --probe, for prefill shapes: one call of the probe's build
  std::optional<probe::DecodeSummary> decodeProbe;  ///< with --probe, for decode shapes
};

/// decode, prefill, all, smoke, or modifiers: each modifier on the decode and prefill shapes it
/// costs most on, beside the same shape without it, and the sliding-window speed shapes.
std::vector<Shape> shapesFor(const std::string& suite);
/// What a shape may add, for `bench --shape`'s help and errors.
inline constexpr const char* kShapeModifiers =
    "+window<W>, +softcap<C>, +alibi, +sinks, and the storage +bf16, +kvtok, +int8, +q8_0, +pg<N>";
/// Parses "decode:B:Hq:Hkv:kv:D" or "prefill:B:Hq:Hkv:S:D" (causal), each optionally followed by
/// modifiers and storage: "+window4096+sinks", "+bf16+kvtok", "+int8", "+pg64". Refuses, naming
/// --shape, two modifiers of a kind (two windows, int8 and q8_0), Hq not a multiple of Hkv and pages
/// that would cut a quantized cache's blocks: what would otherwise fail after the ceilings.
Shape parseShape(const std::string& text);

/// One shape's inputs on the device: copies to rotate over, and the host values for the check.
struct Prepared {
  Shape shape;
  AttentionProblem problem;
  std::vector<float> q, k, v;
  std::vector<AttentionCall> calls;
};

/// Knob sets a sweep tries for a shape: every decode or prefill variant dimension.
std::vector<std::pair<std::string, AttentionOptions>> sweepVariants(const Shape& shape, const AttentionOptions& base,
                                                                  const DeviceInfo& device);

class Runner {
 public:
  Runner(Runtime& runtime, Options options);
  Ceilings measureCeilings();
  /// One read stream of `scan` (bench --read-scan): its time in microseconds.
  double readScan(const ReadScan& scan);
  Prepared prepare(const Shape& shape);
  /// Checks then times one call on prepared inputs with the given knobs.
  Result measure(Prepared& prepared, const AttentionOptions& knobs, const Ceilings& ceilings);
  /// One call of the prefill kernel's probe build (FOUNDRY_FA_PREFILL_PROBE) with these knobs, after
  /// a warm-up call, and its summary.
  probe::Summary probe(Prepared& prepared, const AttentionOptions& knobs);
  /// The same for a decode shape (FOUNDRY_FA_DECODE_PROBE).
  probe::DecodeSummary probeDecode(Prepared& prepared, const AttentionOptions& knobs);

 private:
  /// A read stream's buffers and kernel; dispatch() reads the whole buffer over the scan's grid, or
  /// `pieces` 16-byte pieces over `groups` workgroups.
  struct ReadStream {
    ReadScan scan;
    Tensor data, sink;
    KernelSource kernel;
    void dispatch(Dispatcher& d) const;
    void dispatch(Dispatcher& d, std::uint32_t pieces, std::uint32_t groups) const;
  };
  ReadStream prepareRead(const ReadScan& scan);
  /// The probe's records of the second of two calls with `probing` and its `probeKnob` set (the first
  /// builds the pipeline and warms the caches and clocks), and the plan's subgroups per workgroup.
  std::pair<std::vector<std::uint32_t>, std::uint32_t> probeWords(Prepared& prepared, AttentionOptions probing,
                                                                  bool AttentionOptions::*probeKnob);
  double timeCall(const std::function<void(Dispatcher&, std::uint32_t copy)>& record, std::uint32_t copies,
                  std::vector<double>& samples, double* batchUs = nullptr);
  Runtime& rt_;
  Options options_;
};

nlohmann::json toJson(const Result& r);
nlohmann::json toJson(const Ceilings& c);

}  // namespace foundry::bench
