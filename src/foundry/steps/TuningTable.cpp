#include "foundry/steps/TuningTable.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

namespace {

struct Field {
  std::string_view name;
  std::optional<std::uint32_t> TuningValues::*row;
  std::uint32_t Tuning::*resolved;
};

#define FOUNDRY_TUNING_FIELD(n) Field{#n, &TuningValues::n, &Tuning::n}
constexpr Field kFields[] = {
    FOUNDRY_TUNING_FIELD(decodeWarps),         FOUNDRY_TUNING_FIELD(decodeUnroll),
    FOUNDRY_TUNING_FIELD(decodeVecWidth),      FOUNDRY_TUNING_FIELD(decodeLaneElems),
    FOUNDRY_TUNING_FIELD(decodeSplitKeys),     FOUNDRY_TUNING_FIELD(wideDecodeKeys),
    FOUNDRY_TUNING_FIELD(wideDecodeVec),       FOUNDRY_TUNING_FIELD(wideDecodeUnroll),
    FOUNDRY_TUNING_FIELD(decodeHeads),         FOUNDRY_TUNING_FIELD(decodeQueryShared),
    FOUNDRY_TUNING_FIELD(decodeInt8Dot),       FOUNDRY_TUNING_FIELD(decodeIdleLanes),
    FOUNDRY_TUNING_FIELD(decodeTailWords),     FOUNDRY_TUNING_FIELD(decodeScatter),
    FOUNDRY_TUNING_FIELD(decodeHalfProducts),  FOUNDRY_TUNING_FIELD(decodeGroupRows),
    FOUNDRY_TUNING_FIELD(decodeLazyRescale),   FOUNDRY_TUNING_FIELD(decodeTensorCores),
    FOUNDRY_TUNING_FIELD(decodeTensorCoresKeys), FOUNDRY_TUNING_FIELD(decodeTilePairs),
    FOUNDRY_TUNING_FIELD(decodeValueHalves),     FOUNDRY_TUNING_FIELD(decodeValueRegisters),
    FOUNDRY_TUNING_FIELD(decodeBatchedMerge),  FOUNDRY_TUNING_FIELD(decodeClaimedKeys),
    FOUNDRY_TUNING_FIELD(coopWarps),           FOUNDRY_TUNING_FIELD(coopWarpsShared),
    FOUNDRY_TUNING_FIELD(coopKeysPerTile),     FOUNDRY_TUNING_FIELD(coopKeysPerTileShared),
    FOUNDRY_TUNING_FIELD(coopStages),          FOUNDRY_TUNING_FIELD(coopOneStageGroups),
    FOUNDRY_TUNING_FIELD(coopMinWarps),        FOUNDRY_TUNING_FIELD(coop2),
    FOUNDRY_TUNING_FIELD(coop2Warps),          FOUNDRY_TUNING_FIELD(coop2KeysPerTile),
    FOUNDRY_TUNING_FIELD(coop2Stages),         FOUNDRY_TUNING_FIELD(coop2Subgroup),
    FOUNDRY_TUNING_FIELD(coop2Groups),
    FOUNDRY_TUNING_FIELD(prefillWarps),        FOUNDRY_TUNING_FIELD(prefillRowsPerWarp),
    FOUNDRY_TUNING_FIELD(prefillKeysPerTile),  FOUNDRY_TUNING_FIELD(prefillStages),
    FOUNDRY_TUNING_FIELD(prefillSplitTiles),   FOUNDRY_TUNING_FIELD(prefillHeadsFirstKiB),
    FOUNDRY_TUNING_FIELD(prefillMaskSplit),
};
#undef FOUNDRY_TUNING_FIELD

}  // namespace

const std::vector<TuningRow>& tuningTable() {
  static const std::vector<TuningRow> table = {
      {{},
       {.decodeWarps = 8, .decodeUnroll = 4, .decodeVecWidth = 4, .decodeLaneElems = 8, .decodeSplitKeys = 256,
        .wideDecodeKeys = 0, .wideDecodeVec = 8, .wideDecodeUnroll = 8, .decodeHeads = 0,
        .decodeQueryShared = 0, .decodeInt8Dot = 0, .decodeIdleLanes = 0, .decodeTailWords = 0, .decodeScatter = 0,
        .decodeHalfProducts = 0, .decodeLazyRescale = 0, .decodeGroupRows = 0,
        .decodeTensorCores = 0, .decodeTensorCoresKeys = 0, .decodeTilePairs = 0, .decodeValueHalves = 0,
        .decodeValueRegisters = 0, .decodeBatchedMerge = 1, .decodeClaimedKeys = 0,
        .coopWarps = 8,
        .coopWarpsShared = 4,
        .coopKeysPerTile = 64, .coopKeysPerTileShared = 64, .coopStages = 2, .coopOneStageGroups = 0, .coopMinWarps = 4,
        .coop2 = 0, .coop2Warps = 4, .coop2KeysPerTile = 32, .coop2Stages = 0, .coop2Subgroup = 0, .coop2Groups = 0,
        .prefillWarps = 4, .prefillRowsPerWarp = 4,
        .prefillKeysPerTile = 32, .prefillStages = 2, .prefillSplitTiles = 4, .prefillMaskSplit = 1},
       "every device: the H200's sweeps (docs/performance.md), until a family is measured apart"},
      {{},
       {.prefillHeadsFirstKiB = 48 * 1024},
       "every device: H200 causal prefill, heads first against each head in turn: 18% faster at S 2048 and 3-5% "
       "at S 8192 with 32 MiB of K/V, 11% slower with 64 MiB (D256 S 8192); the bound lies between"},
      {{.format = DType::BF16},
       {.coop2Stages = 2, .coop2Subgroup = 1},
       "bf16 on coopmat2 matrices with bf16 operands, which it takes at every head dim and length: subgroup-scope "
       "matrices and two staging buffers where no row below says more (H200 causal prefill D128 S 8192, 2026-11-29: "
       "workgroup scope with tiles straight from the cache took 18725-18747 us against 2474-2478)"},
      {{.elementBytes = 2},
       {.wideDecodeKeys = 4096},
       "16-bit K/V (f16, bf16): 16-byte loads, 8 steps in flight from 4096 keys per workgroup (H200: 2.6% faster at 8192, "
       "1.3% at 4096, 1-7% slower below)"},
      {{.elementBytes = 1},
       {.decodeVecWidth = 16, .wideDecodeKeys = 4096, .wideDecodeVec = 16, .wideDecodeUnroll = 4},
       "8-bit K/V (int8, q8_0): 16-code loads, 4 steps in flight from 4096 keys per workgroup, each load's scale taken "
       "once (H200, int8 at kv 65536: 85.5 us against 91.8 us with 8-code loads and 8 steps; B8 kv 16384: 157.2 "
       "against 170.0; 16-code loads with 8 steps spill)"},
      {{.minHeadDim = 80, .maxHeadDim = 96, .elementBytes = 2},
       {.decodeQueryShared = 1},
       "16-bit rows of 80 and 96 (loads of 8 bytes, many registers of q per lane): decode reads q from shared memory "
       "at each use (H200, batch 1 kv 65536, 2026-11-26: D96 58.4 us against 64.5, D80 62.0 against 68.4; at D128 "
       "74.1 against 71.7, D256 155.4 against 151.3 and int8 D128 107.0 against 85.5, so not there)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 80, .maxHeadDim = 80, .elementBytes = 2},
       {.wideDecodeKeys = 0, .decodeQueryShared = 0, .decodeTailWords = 1, .decodeScatter = 1},
       "Hopper, 16-bit rows of 80: 8 lanes of 10 elements, each two 8-byte loads and one 4-byte word, q in "
       "registers, 4 steps in flight, at every length (H200, 2026-11-27: batch 1 kv 65536 51.8-52.4 us against "
       "55.8-56.1 for the same split as a row of 96 with idle lanes, batch 8 kv 16384 91.9-92.3 against 98.8-98.9, "
       "bf16 52.6 against 56.4, kv 16384 21.2-21.7 against 24.4-25.1 for 4 lanes of 20 with q shared); scores "
       "scattered, each summed once per key and weighed by one lane pair (against the same plan unscattered: 51.1 "
       "against 51.6-51.9, batch 8 88.8-88.9 against 90.4, bf16 51.2-51.4 against 51.8-52.0)"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 2, .headDims = {40, 56, 72, 88, 104, 112, 160, 208}},
       {.decodeTailWords = 1},
       "Hopper, 16-bit rows of 40, 56, 72, 88, 104, 112, 160 and 208: whole loads per lane, then words (H200, f16 "
       "batch 1 kv 65536, 2026-11-27, the plan before against tail words: D40 38.2 against 34.1 us, D56 91.2 against "
       "39.3, D72 68.0 against 65.2, D88 142.4 against 70.2, D104 135.7 against 105.7, D112 176.0 against 73.1, "
       "D160 123.6 against 96.2, D208 271.7 against 236.5; not at D48 (35.3 against 40.8), D96 (58.4 against "
       "73.0), D192 (106.1 against 129.8) or D240 (482.0); D120, D144 and D176 within 2%)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 112, .maxHeadDim = 112, .elementBytes = 2},
       {.decodeQueryShared = 1},
       "Hopper, 16-bit rows of 112 in tail words: q read from shared memory at each use (H200, f16 batch 1 kv "
       "65536, 2026-11-27: 66.8 us against 73.8 with q in registers)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 128, .maxHeadDim = 128, .elementBytes = 1},
       {.decodeScatter = 1},
       "Hopper, 8-bit rows of 128 (int8, q8_0): scores scattered, each summed once per key and weighed by one lane "
       "pair (H200, batch 1 kv 65536, 2026-11-27: int8 77.9-78.4 us against 87.0-87.3, q8_0 97.3-97.7 against "
       "102.3-102.4; int8 batch 8 kv 16384 142.4-142.9 against 160.3-160.4)"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 1},
       {.decodeHalfProducts = 1},
       "Hopper, int8 rows: codes multiplied in packed f16, each step's scales read once (H200, batch 1 kv 65536, "
       "2026-11-27: D128 61.7-62.0 us against 77.4-78.3, D64 39.8 against 44.6, D96 62.6 against 71.9, D256 138.4 "
       "against 174.3; D128 batch 8 kv 16384 110.8-111.3 against 141.9-143.7); q8_0 keeps a scale in every row and "
       "is left as it was"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 96, .elementBytes = 1},
       {.decodeLazyRescale = 1},
       "Hopper, 8-bit rows of 96 and more: O's rescale skipped where no lane's maximum grew, one subgroup vote a step "
       "(H200, int8 batch 1 kv 65536, 2026-11-28: D128 60.0-60.3 us against 61.6-61.8, D96 56.4-56.5 against "
       "62.1, D256 129.5-129.7 against 130.5-130.8 with a vote per head; D128 batch 8 kv 16384 106.1 against "
       "111.2-111.5); not at D64 (38.0 both ways); q8_0 not measured"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 1, .headDims = {64, 128}},
       {.decodeTensorCores = 1, .decodeTensorCoresKeys = 2048},
       "Hopper, int8 rows of 64 and 128: decode on the tensor cores, 16-key tiles as rows and the heads as columns, "
       "from 2048 keys per workgroup (H200, 2026-11-29, against the subgroup kernel: batch 1 kv 65536 D128 51.6-55.8 "
       "us against 58.8-60.3, pages of 64 55.1-57.2 against 64.6, D64 34.8-41.2 against 36.9-38.1; D128 batch 8 kv "
       "16384 89.5-91.6 against 105.1-106.7, batch 32 kv 2048 55.0-55.2 against 62.0; not at 256 keys per workgroup: "
       "batch 1 kv 4096 31.8-37.3 against 27.1, kv 1024 42.0-42.4 against 30.0); not at D256 (218.8-227.2 against "
       "124.1-126.0); q8_0 keeps the subgroup kernel (f16: the next row, measured with the GPU kept busy)"},
      {{.family = DeviceFamily::Hopper, .format = DType::F16, .headDims = {64, 128}},
       {.decodeTensorCores = 1, .decodeTensorCoresKeys = 2048},
       "Hopper, f16 rows of 64 and 128: decode on the tensor cores from 2048 keys per workgroup. Timed with batches "
       "queued back to back (the GPU kept busy, as a model keeps it), the subgroup kernel's f32 products reach the "
       "power cap and its clock drops; the tensor cores do not (H200, 2026-11-29: batch 1 kv 65536 D128 71.1-72.1 us "
       "against 81.6-97.0 over ten processes, batch 8 kv 16384 130.0 against 138.6, batch 32 kv 2048 73.0 against "
       "97.8, D64 41.3 against 42.3); with the GPU idle between batches the subgroup kernel is 2% faster at D128 "
       "(69.7-71.0 against 71.4). Not bf16: its tensor-core route (f16 products over a power of two a tile) took "
       "93.8-94.0 us at batch 1 kv 65536 D128, one tile in flight, against the subgroup kernel's 72.4-96.9"},
      {{.family = DeviceFamily::Hopper, .format = DType::BF16, .headDims = {128}},
       {.decodeTensorCores = 1, .decodeTensorCoresKeys = 2048},
       "Hopper, bf16 rows of 128, where the device and glslc take bf16 operands (the Selector keeps the subgroup "
       "kernel otherwise): decode on the tensor cores from 2048 keys per workgroup, bf16 multiplied as stored "
       "(H200, 2026-11-29, queued: batch 1 kv 65536 72.3 us in two processes against f16's 71.3-71.4 in the same "
       "processes and the subgroup kernel's 70.0-88.4, the power cap in two of four; batch 8 kv 16384 128.9 against "
       "131.6-179.4; f16 over a power of two a tile took 93.3-93.7); not at D64 (42.2-42.4 against 39.6-39.7)"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 1, .headDims = {128}},
       {.decodeTilePairs = 1},
       "Hopper, int8 rows of 128 on the tensor cores: two tiles at a time, their K rows staged together and one "
       "softmax for 32 keys (H200, 2026-11-29, against one tile at a time in the same calls: batch 1 kv 65536 "
       "49.1-49.3 us against 50.7-50.8, batch 8 kv 16384 82.4-83.0 against 86.7-87.5 in two calls; pages of 64 "
       "spread 50-67 us both ways); not at D64 (34.9-51.7 against 35.8-50.1, not told apart)"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 1, .headDims = {128}},
       {.decodeValueHalves = 1},
       "Hopper, int8 rows of 128 on the tensor cores: V staged in two halves of its dims, the next tile's V "
       "loaded between them (H200, 2026-11-30, against V whole in the same call, three processes each: batch 1 "
       "kv 65536 47.3-47.4 us against 49.3-49.5, pages of 64 48.5-48.6 against 49.7-49.9, batch 32 kv 4096 "
       "84.6-84.8 against 87.8-88.0, batch 8 kv 4096 29.3-29.4 against 30.0-30.1; batch 8 kv 16384 79.3, 89.0 "
       "and 89.8 against 83.4-83.8)"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 1, .headDims = {128}},
       {.decodeValueRegisters = 1},
       "Hopper, int8 rows of 128 on the tensor cores, where the probe finds the 16x16 f16 layout: V never staged, "
       "each lane widening its own loads into its fragments of V^T, a tile's next V rows loaded with its next K "
       "rows (H200, 2026-11-30, against V in halves in the same calls: batch 1 kv 65536 43.5-43.6 us against "
       "47.0-47.2 in two processes each, 43.4 and 44.1 against 47.0 and 47.3 in two more calls; pages of 64 "
       "45.2-45.5 against 48.3-48.7; batch 8 kv 16384 72.2 and 73.6 against 79.0 and 79.2)"},
      {{.family = DeviceFamily::Hopper, .elementBytes = 2, .headDims = {256}},
       {.decodeLazyRescale = 1},
       "Hopper, 16-bit rows of 256: O's rescale skipped where no lane's maximum grew, one vote for the 4 heads (H200, "
       "f16 batch 1 kv 65536, 2026-11-28: 136.9-140.9 us against 149.8-151.4 in two calls, where a vote per head "
       "took 160.5-160.7); not at D128 (73.4-73.5 against 70.9-71.0)"},
      {{.minHeadDim = 320},
       {.decodeHeads = 2},
       "rows of 320 and more (MLA's latent 576): 2 query heads per decode workgroup, so that a lane's q and output "
       "registers leave room for wider loads and more keys per step (H200, DeepSeek-V2-Lite after 4096 tokens: "
       "29.9 us a layer against 284 with 8 heads and 47.6 with 4)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 128, .maxHeadDim = 128},
       {.coopKeysPerTile = 32, .prefillSplitTiles = 8},
       "Hopper, head_dim 128: 32-key tiles in two staging buffers (H200 causal prefill, 2026-11-26, against 64 keys "
       "in one buffer: S 8192 3287 against 3453 us in one call and 3409 against 3430 in another, S 2048 245 against "
       "257 and 255 against 257; the loads' share of a subgroup's cycles falls from 14.6% to 8.5%); a Split-K part "
       "keeps at least 256 keys as with 64-key tiles (S 512: 53.0 us with 2 splits against 60.7 with 3)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 128, .maxHeadDim = 128},
       {.coop2 = 1, .coop2Warps = 8, .coop2KeysPerTile = 32, .coop2Stages = 2, .coop2Subgroup = 1, .coop2Groups = 1},
       "Hopper, head_dim 128, where a glslc compiles GL_NV_cooperative_matrix2 (FOUNDRY_GLSLC): each subgroup's 16 "
       "rows as subgroup-scope matrices of flexible dimensions, 8 subgroups, two 32-key staging buffers (H200 causal "
       "prefill, 2026-11-28, against GL_NV_cooperative_matrix in the same calls: S 8192 2711.8-2737.3 us against "
       "3201.3-3224.3, S 4096 739.9-740.8 against 855.6-856.1, S 2048 216.6-216.8 against 241.4-242.8, S 1024 "
       "69.8-69.9 against 77.0); from one workgroup per SM (S 512, 128 query tiles: 4 subgroups took 36.5 against "
       "33.0-33.2)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 256, .maxHeadDim = 256},
       {.coopKeysPerTile = 16, .prefillHeadsFirstKiB = 64 * 1024, .prefillMaskSplit = 0},
       "Hopper, head_dim 256: 8 subgroups (Q staged in two passes) and 16-key tiles in two staging buffers, heads "
       "first up to 64 MiB of K/V (H200 causal prefill, 2026-11-26, S 8192: 7082 us in two calls, against 7434 "
       "each head in turn, 9080 for 32-key tiles in one buffer and 11066 for the earlier 4 subgroups; S 2048 525 "
       "against 635 and 775); the tile code once, masks under a flag (2026-11-27: S 8192 7072-7127 us against "
       "7393-7401 with a mask-free copy, whose 255 registers the driver eked out with 10.5 KiB of shared memory; "
       "S 2048 525 against 543)"},
      {{.family = DeviceFamily::Hopper, .format = DType::BF16, .headDims = {256}},
       {.coop2Warps = 4, .coop2KeysPerTile = 16},
       "Hopper, bf16 rows of 256 on coopmat2 matrices: 4 subgroups and 16-key tiles, the fastest coopmat2 tiling f16 "
       "had at D256 (H200 causal prefill S 8192, 2026-11-28: 11784 us at subgroup scope, 17831-17898 with 32-key "
       "tiles in one buffer; f16 itself keeps GL_NV_cooperative_matrix, 7175-7216)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 192, .maxHeadDim = 192},
       {.coopWarps = 4, .coopKeysPerTile = 16, .coopStages = 1, .coopOneStageGroups = 0},
       "Hopper, head_dim 192: 4 subgroups and one 16-key staging buffer (H200 causal prefill S 8192, 2026-11-26: "
       "5834 and 5848 us in two calls against 6430 and 6435 for 8 subgroups with 32-key tiles in one buffer, 6926 "
       "for two 16-key buffers)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 64, .maxHeadDim = 64},
       {.coopWarps = 4, .coopKeysPerTile = 32, .coopStages = 1, .coopOneStageGroups = 6},
       "Hopper, head_dim 64: 4 subgroups and 32-key tiles; from 6 workgroups per SM one staging buffer (9 KiB), so "
       "four workgroups share an SM (H200 causal prefill, 2026-11-26: S 8192 1735 us against 1805 for 8 subgroups "
       "and two 64-key buffers and 1984 for two 32-key buffers, S 4096 458 against 479 and 516, S 2048 128.7 against "
       "137.2); shorter grids two buffers (S 1024 44.2 against 51.1 with one and 44.9 for the old plan, S 512 20.7 "
       "against 24.6 and 38.3)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 64, .maxHeadDim = 64},
       {.coop2 = 1, .coop2Warps = 4, .coop2KeysPerTile = 32, .coop2Stages = 1, .coop2Subgroup = 1, .coop2Groups = 12},
       "Hopper, head_dim 64, where a glslc compiles GL_NV_cooperative_matrix2 (FOUNDRY_GLSLC): subgroup-scope "
       "matrices of flexible dimensions, 4 subgroups, one 32-key staging buffer, from 12 workgroups per SM (H200 "
       "causal prefill, 2026-11-28, against GL_NV_cooperative_matrix in the same calls: S 8192, 31 workgroups a "
       "SM, 1617.4-1619.4 us against 1699.8-1701.2, S 4096, 15.5 a SM, 437.9 against 452.7-453.2; S 2048, 7.75 a "
       "SM, 133.2-134.4 against 125.2-126.3, S 512 26.8-27.1 against 20.6-21.1)"},
      {{.family = DeviceFamily::Hopper, .format = DType::BF16, .headDims = {64}},
       {.coop2KeysPerTile = 64},
       "Hopper, bf16 rows of 64 on coopmat2 matrices with bf16 operands: 64-key tiles (H200 causal prefill S 8192, "
       "2026-11-29: 1494.9-1498.8 us against 1613.1 with 32-key tiles in two rounds; f16 in the same calls 1467.8-1468.7 "
       "with 32 keys, 1493.1-1494.4 with 64)"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 96, .maxHeadDim = 96},
       {.coop2 = 1, .coop2Warps = 8, .coop2KeysPerTile = 64, .coop2Stages = 1, .coop2Subgroup = 1, .coop2Groups = 1},
       "Hopper, head_dim 96, where a glslc compiles GL_NV_cooperative_matrix2 (FOUNDRY_GLSLC): subgroup-scope "
       "matrices, 8 subgroups, one 64-key staging buffer (H200 causal prefill, 2026-11-28, against "
       "GL_NV_cooperative_matrix in the same call: S 8192 2267.4-2269.8 us against 2666.5-2670.7, S 2048 "
       "184.9-185.3 against 204.8-205.0; 4 subgroups with one 32-key buffer 2388.4-2390.4 and 189.1-189.4, with "
       "64 keys 3195.8-3196.7); from one workgroup per SM, as head_dim 128"},
      {{.family = DeviceFamily::Hopper, .minHeadDim = 80, .maxHeadDim = 80},
       {.coop2 = 1, .coop2Warps = 4, .coop2KeysPerTile = 64, .coop2Stages = 1, .coop2Subgroup = 1, .coop2Groups = 2},
       "Hopper, head_dim 80, where a glslc compiles GL_NV_cooperative_matrix2 (FOUNDRY_GLSLC): subgroup-scope "
       "matrices, 4 subgroups, one 64-key staging buffer (a 32-key tile of 80-wide rows does not split over "
       "the workgroup's loads) (H200 causal prefill, 2026-11-28, against GL_NV_cooperative_matrix in the same "
       "call: S 8192 1778.3-1790.1 us against 2523.6-2524.2, S 2048 142.4 against 188.5; two 64-key buffers "
       "2764.0-2769.8 and 226.4-226.7)"},
      {{.minHeadDim = 65},
       {.coopKeysPerTileShared = 32},
       "rows wider than 64 with the softmax in shared memory: 32-key tiles keep the staging small"},
      {{.narrowSubgroup = true},
       {.decodeWarps = 4, .prefillWarps = 2},
       "subgroups narrower than 32: fewer subgroups per workgroup"},
      {{.family = DeviceFamily::Lavapipe},
       {.decodeUnroll = 1, .wideDecodeKeys = 0},
       "lavapipe: a CPU driver gains nothing from more loads in flight"},
      {{.family = DeviceFamily::Lavapipe},
       {.prefillKeysPerTile = 16},
       "lavapipe: 16-key prefill tiles, which its LLVM compiles 3-4x faster than 32-key ones and runs about as fast "
       "(2-core CI machine, 2026-12-01, a kernel's first compile: D64 4.7 s against 13.7, D96 6.7 against 22, D112 "
       "8.5 against 34; prefill S 512 within the machine's 25% spread between runs; docs/performance.md, \"Prefill "
       "tiles on lavapipe\")"},
      {{.family = DeviceFamily::Lavapipe},
       {.prefillStages = 1},
       "lavapipe: one K/V staging buffer, each tile copied in a loop of 8-element passes (2026-12-02, a prefill "
       "bench process with empty caches on the 2-core CI machine: D128 5.6 s against 15.4 with two buffers, D256 7.1 "
       "against 44-48 unrolled, a decode one 5.2-5.7; prefill S 512 as fast or faster, D256 12% faster; "
       "docs/performance.md, \"Prefill tiles on lavapipe\")"},
      {{.family = DeviceFamily::Lavapipe},
       {.decodeBatchedMerge = 0},
       "lavapipe: the last workgroup folds each element's splits in a loop, where the batched merge's unrolled "
       "loads and folds (32 elements x 16 splits an invocation at D128 with 8 heads) took its LLVM 9x longer to "
       "compile (2-core CI machine, 2026-12-02, a decode bench process with empty caches, 64 splits: 7.5 s against "
       "68.9; docs/performance.md, \"The merged Split-K on lavapipe\")"},
  };
  return table;
}

std::vector<std::string_view> tuningValueNames() {
  std::vector<std::string_view> names;
  for (const Field& f : kFields) names.push_back(f.name);
  return names;
}

bool tuningMatches(const TuningMatch& m, const DeviceInfo& device, std::uint32_t headDim, DType dtype) {
  return (!m.family || *m.family == device.family) && headDim >= m.minHeadDim && headDim <= m.maxHeadDim &&
         (!m.elementBytes || *m.elementBytes == storageFormat(dtype).bytes) && (!m.format || *m.format == dtype) &&
         (!m.narrowSubgroup || *m.narrowSubgroup == (device.subgroupSize < 32)) &&
         (m.headDims.empty() || std::ranges::find(m.headDims, headDim) != m.headDims.end());
}

Tuning tuningFor(const DeviceInfo& device, std::uint32_t headDim, DType dtype) {
  Tuning t;
  for (const Field& f : kFields) t.sources.emplace_back(f.name, std::string_view());
  for (const TuningRow& row : tuningTable()) {
    if (!tuningMatches(row.match, device, headDim, dtype)) continue;
    for (std::size_t i = 0; i < std::size(kFields); ++i) {
      if (const auto& value = row.values.*kFields[i].row) t.*kFields[i].resolved = *value, t.sources[i].second = row.why;
    }
  }
  for (const auto& [name, why] : t.sources) {
    if (why.empty()) throw InternalError(fmt::format("the tuning table's rows for every device leave {} unset", name));
  }
  return t;
}

std::string Tuning::sourceOf(std::string_view value) const {
  const auto it = std::find_if(sources.begin(), sources.end(), [&](const auto& s) { return s.first == value; });
  if (it == sources.end()) throw InternalError(fmt::format("no tuning value named {}", value));
  return fmt::format("tuning table: {}", it->second);
}

}  // namespace foundry
