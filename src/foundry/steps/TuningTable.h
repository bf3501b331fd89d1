#pragma once
// Tuning per device family: the starting points the Selector plans from (subgroups per workgroup,
// loads in flight, tile widths, the Split-K floor), in one table keyed by (family, head dim, dtype).
// The Selector's fallbacks (narrower loads, fewer subgroups, narrower tiles) still apply on top: a row
// says what to try first, never what is usable.
//
// Rows apply in table order, each over the ones before it, so a row only names what differs where it
// matches; the rows for every device set every value. Knobs beat every row.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foundry/DType.h"

namespace foundry {

struct DeviceInfo;
enum class DeviceFamily;

/// The values a row may set; unset ones keep what earlier rows gave.
struct TuningValues {
  // Decode.
  std::optional<std::uint32_t> decodeWarps;       ///< subgroups per workgroup
  std::optional<std::uint32_t> decodeUnroll;      ///< K/V steps in flight per lane
  std::optional<std::uint32_t> decodeVecWidth;    ///< the widest K/V load tried (elements)
  std::optional<std::uint32_t> decodeLaneElems;   ///< elements of each key per lane aimed at
  std::optional<std::uint32_t> decodeSplitKeys;   ///< the fewest keys one Split-K part reads
  std::optional<std::uint32_t> wideDecodeKeys;    ///< keys per workgroup from which the wide loads go (0: never)
  std::optional<std::uint32_t> wideDecodeVec;     ///< the wide variant's load width
  std::optional<std::uint32_t> wideDecodeUnroll;  ///< the wide variant's steps in flight
  std::optional<std::uint32_t> decodeHeads;       ///< query heads per workgroup where fewer than the default (0: default)
  std::optional<std::uint32_t> decodeQueryShared; ///< 1: decode reads q from shared memory at each use
  std::optional<std::uint32_t> decodeInt8Dot;     ///< 1: quantized K through integer dot products
  std::optional<std::uint32_t> decodeIdleLanes;   ///< 1: lane clusters wider than the row (whole loads, idle lanes)
  std::optional<std::uint32_t> decodeTailWords;   ///< 1: 16-bit rows in whole loads per lane, then single words
  std::optional<std::uint32_t> decodeScatter;     ///< 1: each score summed once, weighed by one lane group
  std::optional<std::uint32_t> decodeHalfProducts;  ///< 1: int8 codes multiplied in packed f16 (step scales)
  std::optional<std::uint32_t> decodeLazyRescale;  ///< 1: O's rescale skipped where no maximum grew (a vote)
  std::optional<std::uint32_t> decodeGroupRows;   ///< 1: decode as a prefill of each KV head's GQA group (its rows)
  std::optional<std::uint32_t> decodeTensorCores; ///< 1: decode on tensor cores (16-key tiles, heads as columns)
  std::optional<std::uint32_t> decodeTensorCoresKeys; ///< keys per workgroup from which decodeTensorCores applies
  std::optional<std::uint32_t> decodeTilePairs;  ///< 1: the tensor-core decode takes two tiles at a time
  std::optional<std::uint32_t> decodeValueHalves;  ///< 1: the tensor-core decode stages V in halves of its dims
  std::optional<std::uint32_t> decodeValueRegisters;  ///< 1: the tensor-core decode builds V's fragments from its loads
  std::optional<std::uint32_t> decodeBatchedMerge;  ///< 1: the last workgroup's merge loads batches of splits at once
  std::optional<std::uint32_t> decodeClaimedKeys;  ///< keys each split leaves to its head group's claimed end
  // Prefill on cooperative matrices.
  std::optional<std::uint32_t> coopWarps;            ///< subgroups (16 query rows each), register softmax
  std::optional<std::uint32_t> coopWarpsShared;      ///< the same with the softmax in shared memory
  std::optional<std::uint32_t> coopKeysPerTile;      ///< keys per tile, register softmax
  std::optional<std::uint32_t> coopKeysPerTileShared;///< keys per tile, softmax in shared memory
  std::optional<std::uint32_t> coopStages;           ///< K/V staging buffers tried first (2 or 1)
  /// coopStages 1 applies from this many workgroups per compute unit (a shorter grid tries 2 first).
  std::optional<std::uint32_t> coopOneStageGroups;
  /// The fewest subgroups a workgroup is cut to while the query tiles do not fill the compute units
  /// (smaller query tiles instead of a Split-K).
  std::optional<std::uint32_t> coopMinWarps;
  /// 1: workgroup-scope matrices (GL_NV_cooperative_matrix2) where the device and compiler have them.
  std::optional<std::uint32_t> coop2;
  std::optional<std::uint32_t> coop2Warps;        ///< subgroups of a workgroup-scope tile (16 query rows each)
  std::optional<std::uint32_t> coop2KeysPerTile;  ///< keys per workgroup-scope tile
  std::optional<std::uint32_t> coop2Stages;       ///< 0: workgroup-scope tiles load straight from the cache
  /// 1: coop2 on subgroup-scope matrices of flexible dimensions (each subgroup's 16 rows), 0: one
  /// workgroup-scope matrix.
  std::optional<std::uint32_t> coop2Subgroup;
  /// The tuning table's coop2 applies from this many workgroups (of coop2Warps subgroups) per compute
  /// unit; a shorter grid keeps GL_NV_cooperative_matrix.
  std::optional<std::uint32_t> coop2Groups;
  // Prefill on subgroups.
  std::optional<std::uint32_t> prefillWarps;        ///< subgroups per workgroup
  std::optional<std::uint32_t> prefillRowsPerWarp;  ///< query rows per subgroup
  std::optional<std::uint32_t> prefillKeysPerTile;  ///< keys per tile (at least the subgroup's width)
  std::optional<std::uint32_t> prefillStages;       ///< K/V staging buffers tried first (2 or 1)
  std::optional<std::uint32_t> prefillSplitTiles;   ///< the fewest key tiles one Split-K part reads
  /// Prefill: the most K/V bytes (of one sequence, every KV head) for which heads vary fastest in
  /// the grid; beyond, each head's query tiles go in turn.
  std::optional<std::uint32_t> prefillHeadsFirstKiB;
  /// 1: the tile code compiled with and without the element masks (one copy for tiles every row sees
  /// whole); 0: one copy, the masks under a run-time flag.
  std::optional<std::uint32_t> prefillMaskSplit;
};

/// Where a row applies. Unset fields match everything.
struct TuningMatch {
  std::optional<DeviceFamily> family;
  std::uint32_t minHeadDim = 0;
  std::uint32_t maxHeadDim = UINT32_MAX;
  std::optional<std::uint32_t> elementBytes;  ///< of the K/V format: 2 for f16 and bf16 alike
  std::optional<DType> format;  ///< where set, only this K/V format (a measurement that set it apart)
  /// Devices whose default subgroup is narrower than 32 (a family that does not fix its width).
  std::optional<bool> narrowSubgroup;
  /// Where not empty, only these head dims (inside the bounds above): a measurement that picked them.
  std::vector<std::uint32_t> headDims;
};

struct TuningRow {
  TuningMatch match;
  TuningValues values;
  std::string_view why;  ///< where the numbers come from (a measurement in docs/performance.md, a reason)
};

/// Every value resolved for one (device, head dim, dtype), and the row that gave each.
struct Tuning {
  std::uint32_t decodeWarps = 0, decodeUnroll = 0, decodeVecWidth = 0, decodeLaneElems = 0, decodeSplitKeys = 0,
                wideDecodeKeys = 0, wideDecodeVec = 0, wideDecodeUnroll = 0;
  std::uint32_t decodeHeads = 0;  ///< query heads per decode workgroup, below the group's default; 0: the default
  std::uint32_t decodeQueryShared = 0;  ///< 1: decode reads q from shared memory at each use
  std::uint32_t decodeInt8Dot = 0;      ///< 1: quantized K through integer dot products
  std::uint32_t decodeIdleLanes = 0;    ///< 1: lane clusters wider than the row (whole loads, idle lanes)
  std::uint32_t decodeTailWords = 0;    ///< 1: 16-bit rows in whole loads per lane, then single words
  std::uint32_t decodeScatter = 0;      ///< 1: each score summed once, weighed by one lane group
  std::uint32_t decodeHalfProducts = 0;  ///< 1: int8 codes multiplied in packed f16 (step scales)
  std::uint32_t decodeLazyRescale = 0;  ///< 1: O's rescale skipped where no maximum grew (a vote)
  std::uint32_t decodeGroupRows = 0;    ///< 1: decode as a prefill of each KV head's GQA group (its rows)
  std::uint32_t decodeTensorCores = 0;  ///< 1: decode on tensor cores (16-key tiles, heads as columns)
  std::uint32_t decodeTensorCoresKeys = 0;  ///< keys per workgroup from which decodeTensorCores applies
  std::uint32_t decodeTilePairs = 0;  ///< 1: the tensor-core decode takes two tiles at a time
  std::uint32_t decodeValueHalves = 0;  ///< 1: the tensor-core decode stages V in halves of its dims
  std::uint32_t decodeValueRegisters = 0;  ///< 1: the tensor-core decode builds V's fragments from its loads
  std::uint32_t decodeBatchedMerge = 0;  ///< 1: the last workgroup's merge loads batches of splits at once
  std::uint32_t decodeClaimedKeys = 0;   ///< keys each split leaves to its head group's claimed end (0: none)
  std::uint32_t coopWarps = 0, coopWarpsShared = 0, coopKeysPerTile = 0, coopKeysPerTileShared = 0, coopStages = 0,
                coopOneStageGroups = 0, coopMinWarps = 0, coop2 = 0, coop2Warps = 0, coop2KeysPerTile = 0,
                coop2Stages = 0, coop2Subgroup = 0, coop2Groups = 0;
  std::uint32_t prefillWarps = 0, prefillRowsPerWarp = 0, prefillKeysPerTile = 0, prefillStages = 0,
                prefillSplitTiles = 0, prefillHeadsFirstKiB = 0, prefillMaskSplit = 0;
  /// For each of tuningValueNames(), the `why` of the last row that set it.
  std::vector<std::pair<std::string_view, std::string_view>> sources;

  /// "tuning table: <why>" of the row that gave `value` (a name from tuningValueNames()).
  std::string sourceOf(std::string_view value) const;
};

/// The table, in the order its rows apply.
const std::vector<TuningRow>& tuningTable();
/// The names of TuningValues' fields, as sourceOf() takes them (e.g. "decodeWarps").
std::vector<std::string_view> tuningValueNames();
/// What the table gives a device for one head dim and dtype (of the query/key rows).
Tuning tuningFor(const DeviceInfo& device, std::uint32_t headDim, DType dtype);
/// Whether `match` applies to this device, head dim and dtype.
bool tuningMatches(const TuningMatch& match, const DeviceInfo& device, std::uint32_t headDim, DType dtype);

}  // namespace foundry
