#pragma once
// The Selector: a pure function (problem, device, knobs) -> plan. It picks the kernel variant, the
// Split-K factor and the grids, and gives a reason for every decision. Knobs beat the heuristics; a
// knob value this device cannot honour is a UserError naming the knob and what is accepted here.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "foundry/DeviceInfo.h"
#include "foundry/Dispatcher.h"
#include "foundry/stages/DecodeVariant.h"
#include "foundry/stages/PrefillVariant.h"
#include "foundry/steps/AttentionOptions.h"
#include "foundry/steps/AttentionProblem.h"

namespace foundry {

struct Decision {
  std::string what;
  std::string value;
  std::string reason;
};

struct AttentionPlan {
  bool decode = true;
  DecodeVariant decodeVariant;    ///< when decode
  PrefillVariant prefillVariant;  ///< when prefill
  std::uint32_t splits = 1;       ///< Split-K factor (1: no split)
  std::uint32_t kvChunk = 0;      ///< keys per split
  Grid grid;                      ///< the main (or part) kernel
  Grid reduceGrid;                ///< the Split-K reduce kernel, when reduceKernel()
  std::uint32_t reduceWorkgroup = 64;
  std::uint64_t scratchBytes = 0; ///< Split-K partials (and arrival counters)
  TileShape tile;                 ///< the prefill kernel's (query rows, keys) per tile; 0 x 0 for decode
  std::uint32_t visibleKeys = 0;  ///< the most keys one workgroup's rows can see (what splits divide)
  std::vector<Decision> decisions;
  /// A decode variant the tuning table put on the tensor cores: the subgroup kernel's variant for the
  /// same call, which fit() takes where a workgroup would read fewer keys than the table's bound
  /// (planned once here, so that fitting a length stays cheap).
  std::shared_ptr<const AttentionPlan> shortRanges;

  /// Whether a separate reduce kernel merges the Split-K partials (not when decode merges them in
  /// its last workgroup).
  bool reduceKernel() const { return splits > 1 && !(decode && decodeVariant.fusedReduce); }
  /// Whether the kernel is the probe's build, and its subgroups per workgroup (one record each).
  bool probed() const { return decode ? decodeVariant.probe : prefillVariant.probe; }
  std::uint32_t probeSubgroups() const;

  /// One line per decision: "what = value (reason)".
  std::string describe() const;
};

class Selector {
 public:
  /// variant() then fit(): the whole plan for one call.
  static AttentionPlan plan(const AttentionProblem& problem, const DeviceInfo& device, const AttentionOptions& options);
  /// The choices that hold for every KV length of the problem's shapes: the kernel variant's layout
  /// of lanes, loads, subgroups, tiles and partials. Split-K, the grid and the KV-length-dependent
  /// choices (wider loads for long ranges, the prefill grid's order) are fit()'s.
  static AttentionPlan variant(const AttentionProblem& problem, const DeviceInfo& device,
                               const AttentionOptions& options);
  /// `variant` (from variant() for the same shapes) fitted to the problem's KV length: the splits and
  /// their chunk, the grid, and the choices that follow the length.
  static AttentionPlan fit(const AttentionPlan& variant, const AttentionProblem& problem, const DeviceInfo& device,
                           const AttentionOptions& options);

  /// Why a decode call cannot run as a prefill of its GQA groups (the query heads sharing a KV head taken
  /// as the rows of one query, at one position), or empty: it must be a decode call of a group of two or
  /// more, without RoPE fused, with V rows like K's, and with no modifier that tells its rows apart.
  static std::string groupRowsRefusal(const AttentionProblem& problem, bool fusedRope);
  /// Whether a decode call runs so: FOUNDRY_FA_DECODE_GROUP_ROWS, else the tuning table's decodeGroupRows
  /// where the device has cooperative matrices for the prefill. UserError where the knob asks for it and
  /// groupRowsRefusal() refuses.
  static bool decodeAsGroupRows(const AttentionProblem& problem, bool fusedRope, const DeviceInfo& device,
                                const AttentionOptions& options);
  /// The prefill problem of decodeAsGroupRows(): n_kv_heads heads of q_len = the group, no causal mask.
  static AttentionProblem groupRowsProblem(const AttentionProblem& problem);

  /// Query heads one decode workgroup serves: the largest divisor of the GQA group up to 8.
  static std::uint32_t decodeHeadsPerWorkgroup(std::uint32_t group);
  /// The most keys the query rows of one workgroup (`rows` consecutive queries) can see under the
  /// problem's modifiers, from the start of its `align`-aligned first tile: what Split-K divides.
  static std::uint32_t visibleKeys(const AttentionProblem& problem, std::uint32_t rows, std::uint32_t align);
  /// The most keys one workgroup of `plan`'s kernel may take on `device` (a multiple of its key granule)
  /// before its invocations reach the device's loop limit (DeviceInfo::loopLimit), or 0 where the
  /// device has none; `hookPassesPerKey`: the loop passes the modifiers' hooks add per key of the range
  /// (hookLoopPassesPerKey). fit() splits the keys so that no split holds more.
  static std::uint32_t mostKeysPerWorkgroup(const AttentionPlan& plan, const DeviceInfo& device,
                                            std::uint64_t hookPassesPerKey = 0);
  /// The loop passes the call's modifier hooks may spend in one invocation per key of its workgroup's
  /// range: each call's (AttentionModifier::loopPassesPerCall) times a score, a visibility and a tile
  /// visibility call for each query row it scores a key for (decode: the workgroup's heads; prefill:
  /// a subgroup's rows). An upper bound: an invocation scores only some of the range's keys.
  static std::uint64_t hookLoopPassesPerKey(const AttentionPlan& plan, const AttentionProblem& problem);
  /// Splits of `kvLen` keys into chunks that are multiples of `granule`, with no empty trailing split.
  static void splitKeys(std::uint32_t kvLen, std::uint32_t wanted, std::uint32_t granule, std::uint32_t& splits,
                        std::uint32_t& chunk);
};

}  // namespace foundry
