#pragma once
// The attention steps' knobs: what FlashAttentionStep and the Selector may be forced to do, and their
// debug switches. Parsed with the runtime's knobs by Options (foundry/steps/Options.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foundry/Knobs.h"
#include "foundry/stages/DecodeVariant.h"

namespace foundry {

/// FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE's value as the knob spells it: auto (unset), subgroup, workgroup.
std::string coopMat2ScopeName(std::optional<bool> subgroup);

struct AttentionOptions {
  bool disableFa = false;                          ///< FOUNDRY_DISABLE_FA
  bool sdpaForceMaterialized = false;              ///< FOUNDRY_SDPA_FORCE_MATERIALIZED
  bool debugSdpa = false;                          ///< FOUNDRY_DEBUG_SDPA
  bool debugSdpaVerbose = false;                   ///< FOUNDRY_DEBUG_SDPA_VERBOSE
  bool sdpaDebugOnlineCompare = false;             ///< FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE
  std::optional<std::uint32_t> faPrefillWarps;     ///< FOUNDRY_FA_PREFILL_WARPS
  std::optional<std::uint32_t> faPrefillSplitK;    ///< FOUNDRY_FA_PREFILL_SPLIT_K
  bool disableFaPrefillSplitK = false;             ///< FOUNDRY_DISABLE_FA_PREFILL_SPLITK
  Force faPrefillCoopMat = Force::Auto;            ///< FOUNDRY_FA_PREFILL_COOPMAT
  Force faPrefillRegisterSoftmax = Force::Auto;    ///< FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX
  std::optional<std::uint32_t> faPrefillKeysPerTile;///< FOUNDRY_FA_PREFILL_KEYS_PER_TILE
  std::optional<std::uint32_t> faPrefillStages;    ///< FOUNDRY_FA_PREFILL_STAGES
  Force faPrefillHeadsFirst = Force::Auto;         ///< FOUNDRY_FA_PREFILL_HEADS_FIRST
  Force faPrefillMaskSplit = Force::Auto;          ///< FOUNDRY_FA_PREFILL_MASK_SPLIT
  bool faPrefillProbe = false;                     ///< FOUNDRY_FA_PREFILL_PROBE
  Force faPrefillLoader = Force::Auto;             ///< FOUNDRY_FA_PREFILL_LOADER
  Force faPrefillCoopMat2 = Force::Auto;           ///< FOUNDRY_FA_PREFILL_COOPMAT2
  /// FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE: true subgroup, false workgroup, unset auto (the tuning table).
  std::optional<bool> faPrefillCoopMat2Subgroup;
  std::optional<std::uint32_t> faDecodeWarps;      ///< FOUNDRY_FA_DECODE_WARPS
  std::optional<std::uint32_t> faDecodeHeads;      ///< FOUNDRY_FA_DECODE_HEADS
  std::optional<std::uint32_t> faDecodeKeysPerWarp;///< FOUNDRY_FA_DECODE_KEYS_PER_WARP
  bool faDecodeScalar = false;                     ///< FOUNDRY_FA_DECODE_SCALAR
  std::optional<PartialStorage> faDecodeTgOut;     ///< FOUNDRY_FA_DECODE_TG_OUT
  std::optional<std::uint32_t> faDecodeVectorWidth;///< FOUNDRY_FA_DECODE_VEC
  std::optional<std::uint32_t> faDecodeUnroll;     ///< FOUNDRY_FA_DECODE_UNROLL
  std::optional<std::uint32_t> faDecodeSplitK;     ///< FOUNDRY_FA_DECODE_SPLIT_K
  Force faDecodeFusedReduce = Force::Auto;         ///< FOUNDRY_FA_DECODE_FUSED_REDUCE
  Force faDecodeBatchedMerge = Force::Auto;        ///< FOUNDRY_FA_DECODE_BATCHED_MERGE
  std::optional<std::uint32_t> faDecodeClaimedKeys;  ///< FOUNDRY_FA_DECODE_CLAIMED_KEYS
  Force faDecodeTilePairs = Force::Auto;           ///< FOUNDRY_FA_DECODE_TILE_PAIRS
  Force faDecodeValueHalves = Force::Auto;         ///< FOUNDRY_FA_DECODE_VALUE_HALVES
  Force faDecodeValueRegisters = Force::Auto;      ///< FOUNDRY_FA_DECODE_VALUE_REGISTERS
  Force faDecodeQueryShared = Force::Auto;         ///< FOUNDRY_FA_DECODE_Q_SHARED
  Force faDecodeInt8Dot = Force::Auto;             ///< FOUNDRY_FA_DECODE_INT8_DOT
  Force faDecodeIdleLanes = Force::Auto;           ///< FOUNDRY_FA_DECODE_IDLE_LANES
  Force faDecodeTailWords = Force::Auto;           ///< FOUNDRY_FA_DECODE_TAIL_WORDS
  Force faDecodeScatter = Force::Auto;             ///< FOUNDRY_FA_DECODE_SCATTER
  Force faDecodeStepScales = Force::Auto;          ///< FOUNDRY_FA_DECODE_STEP_SCALES
  Force faDecodeHalfProducts = Force::Auto;        ///< FOUNDRY_FA_DECODE_HALF_PRODUCTS
  Force faDecodeLazyRescale = Force::Auto;         ///< FOUNDRY_FA_DECODE_LAZY_RESCALE
  Force faDecodeTensorCores = Force::Auto;         ///< FOUNDRY_FA_DECODE_TENSOR_CORES
  Force faDecodeGroupRows = Force::Auto;           ///< FOUNDRY_FA_DECODE_GROUP_ROWS
  bool faDecodeProbe = false;                      ///< FOUNDRY_FA_DECODE_PROBE
  Force decodeReplay = Force::Auto;                ///< FOUNDRY_DECODE_REPLAY (read by the runner's decode loop; auto: on GPUs)
  /// Where each of these knobs got its value.
  KnobSources sources;

  /// The attention knobs.
  static const std::vector<Knob<AttentionOptions>>& knobs();
  /// The attention knobs of a given environment (tests pass a map); Options::fromEnvironment(env).attention,
  /// so an unknown FOUNDRY_* variable is an error here too.
  static AttentionOptions fromEnvironment(const std::map<std::string, std::string>& env);
  /// Every one of these knobs and its current value.
  std::vector<std::pair<std::string, std::string>> describe() const { return knob::describe(knobs(), *this); }
  /// UserError naming the knob of any field set outside its accepted values (knob::validate).
  void validate() const { knob::validate(knobs(), *this); }
  std::string sourceOf(std::string_view knob) const { return sources.sourceOf(knob); }
  std::string fieldOf(std::string_view knob) const { return sources.fieldOf(knob); }
};

}  // namespace foundry
