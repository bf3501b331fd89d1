#include "foundry/steps/AttentionOptions.h"

#include "foundry/steps/Options.h"

namespace foundry {

std::string coopMat2ScopeName(std::optional<bool> subgroup) {
  return !subgroup ? "auto" : *subgroup ? "subgroup" : "workgroup";
}

const std::vector<Knob<AttentionOptions>>& AttentionOptions::knobs() {
  using O = AttentionOptions;
  static const std::vector<Knob<O>> table = {
      knob::boolean<&O::disableFa, O>("FOUNDRY_DISABLE_FA",
                                      "FlashAttentionStep refuses to run and points at SdpaReferenceStep"),
      knob::boolean<&O::sdpaForceMaterialized, O>(
          "FOUNDRY_SDPA_FORCE_MATERIALIZED", "as FOUNDRY_DISABLE_FA: the materialised path must be chosen explicitly"),
      knob::boolean<&O::debugSdpa, O>("FOUNDRY_DEBUG_SDPA", "log attention shapes and selector decisions"),
      knob::boolean<&O::debugSdpaVerbose, O>("FOUNDRY_DEBUG_SDPA_VERBOSE", "also log strides, push constants and grids"),
      knob::boolean<&O::sdpaDebugOnlineCompare, O>(
          "FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE", "run flash and reference once per shape; log max-abs and relative error"),
      knob::unsignedOrAuto<&O::faPrefillWarps, O>("FOUNDRY_FA_PREFILL_WARPS", "auto, 1, 2, 4, 8", 1, 8, true,
                                                  "subgroups per prefill workgroup"),
      knob::unsignedOrAuto<&O::faPrefillSplitK, O>("FOUNDRY_FA_PREFILL_SPLIT_K", "auto or 1..256", 1, 256, false,
                                                   "prefill Split-K factor (1 = off)"),
      knob::boolean<&O::disableFaPrefillSplitK, O>("FOUNDRY_DISABLE_FA_PREFILL_SPLITK",
                                                   "never split prefill over the KV length"),
      knob::force<&O::faPrefillCoopMat, O>("FOUNDRY_FA_PREFILL_COOPMAT",
                                           "force the cooperative-matrix prefill variant on or off"),
      knob::force<&O::faPrefillRegisterSoftmax, O>(
          "FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX",
          "cooperative-matrix prefill: softmax in registers (needs the probed quad layout) or through shared memory"),
      knob::unsignedOrAuto<&O::faPrefillKeysPerTile, O>("FOUNDRY_FA_PREFILL_KEYS_PER_TILE",
                                                        "auto, 4, 8, 16, 32, 64, 128", 4, 128, true,
                                                        "keys per prefill K/V tile in shared memory"),
      knob::unsignedOrAuto<&O::faPrefillStages, O>("FOUNDRY_FA_PREFILL_STAGES", "auto, 0, 1, 2", 0, 2, false,
                                                   "prefill K/V staging buffers (2: the next tile loads while "
                                                   "this one is used; 0: workgroup-scope matrices load tiles "
                                                   "straight from an f16 cache that is not paged)"),
      knob::force<&O::faPrefillHeadsFirst, O>(
          "FOUNDRY_FA_PREFILL_HEADS_FIRST",
          "prefill grid order: heads vary fastest (1) or each head's query tiles in turn (0)"),
      knob::force<&O::faPrefillMaskSplit, O>(
          "FOUNDRY_FA_PREFILL_MASK_SPLIT",
          "prefill: the tile code compiled twice, with the element masks and without, the mask-free copy for tiles "
          "every row sees whole (1), or once with the masks under a run-time flag (0)"),
      knob::force<&O::faPrefillLoader, O>(
          "FOUNDRY_FA_PREFILL_LOADER",
          "cooperative-matrix prefill: one more subgroup that only loads the next K/V tile (two staging buffers)"),
      knob::force<&O::faPrefillCoopMat2, O>(
          "FOUNDRY_FA_PREFILL_COOPMAT2",
          "cooperative-matrix prefill on VK_NV_cooperative_matrix2 matrices (their scope: "
          "FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE; a glslc for them: FOUNDRY_GLSLC)"),
      {{"FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE", "auto, subgroup, workgroup",
        "coopmat2 prefill: each subgroup's 16 rows as subgroup-scope matrices of flexible dimensions, or the "
        "workgroup's rows as one workgroup-scope matrix"},
       [](O& o, const std::string& v, const std::string& f) {
         if (v == "auto" || v.empty()) o.faPrefillCoopMat2Subgroup = std::nullopt;
         else if (v == "subgroup") o.faPrefillCoopMat2Subgroup = true;
         else if (v == "workgroup") o.faPrefillCoopMat2Subgroup = false;
         else knob::reject(f, v, "auto, subgroup, workgroup");
       },
       [](const O& o) { return coopMat2ScopeName(o.faPrefillCoopMat2Subgroup); }},
      knob::boolean<&O::faPrefillProbe, O>(
          "FOUNDRY_FA_PREFILL_PROBE",
          "prefill kernels record per subgroup its SM, start and end times and the cycles of each phase into "
          "the workspace tensor probe_records (a measuring build of the kernel: foundry bench --probe)"),
      knob::unsignedOrAuto<&O::faDecodeWarps, O>("FOUNDRY_FA_DECODE_WARPS", "auto, 1, 2, 4, 8, 16", 1, 16, true,
                                                 "subgroups per decode workgroup"),
      knob::unsignedOrAuto<&O::faDecodeKeysPerWarp, O>("FOUNDRY_FA_DECODE_KEYS_PER_WARP", "auto, 1, 2, 4, ..., 256", 1,
                                                       256, true, "keys each decode subgroup takes per step"),
      knob::boolean<&O::faDecodeScalar, O>("FOUNDRY_FA_DECODE_SCALAR",
                                           "decode without subgroup operations (reductions through shared memory)"),
      {{"FOUNDRY_FA_DECODE_TG_OUT", "auto, float, half", "storage of decode partials in shared memory"},
       [](O& o, const std::string& v, const std::string& f) {
         if (v == "auto" || v.empty()) o.faDecodeTgOut = std::nullopt;
         else if (v == "float") o.faDecodeTgOut = PartialStorage::Float;
         else if (v == "half") o.faDecodeTgOut = PartialStorage::Half;
         else knob::reject(f, v, "auto, float, half");
       },
       [](const O& o) {
         return o.faDecodeTgOut ? std::string(partialStorageName(*o.faDecodeTgOut)) : std::string("auto");
       }},
      knob::unsignedOrAuto<&O::faDecodeHeads, O>("FOUNDRY_FA_DECODE_HEADS", "auto or 1..64", 1, 64, false,
                                                 "query heads per decode workgroup (a divisor of the GQA group; the "
                                                 "others of the group read the same K/V in workgroups of their own)"),
      knob::unsignedOrAuto<&O::faDecodeVectorWidth, O>("FOUNDRY_FA_DECODE_VEC", "auto, 1, 2, 4, 8, 16", 1, 16, true,
                                                       "elements per K/V load in decode (8: 16-bit or 8-bit K/V, 16: 8-bit)"),
      knob::unsignedOrAuto<&O::faDecodeUnroll, O>("FOUNDRY_FA_DECODE_UNROLL", "auto, 1, 2, 4, 8, 16", 1, 16, true,
                                                  "decode steps whose K/V loads a subgroup issues together"),
      knob::unsignedOrAuto<&O::faDecodeSplitK, O>("FOUNDRY_FA_DECODE_SPLIT_K", "auto or 1..256", 1, 256, false,
                                                  "decode Split-K factor (1 = off)"),
      knob::force<&O::faDecodeQueryShared, O>(
          "FOUNDRY_FA_DECODE_Q_SHARED",
          "decode: read q from shared memory at each use (1), leaving its registers to K/V loads in flight, or hold it "
          "in registers (0)"),
      knob::force<&O::faDecodeIdleLanes, O>(
          "FOUNDRY_FA_DECODE_IDLE_LANES",
          "decode: lane clusters wider than a K/V row needs, so that rows like D80's take whole 16-byte loads with "
          "some lanes idle (1), or only clusters that divide the row (0)"),
      knob::force<&O::faDecodeTailWords, O>(
          "FOUNDRY_FA_DECODE_TAIL_WORDS",
          "decode, 16-bit K/V: each lane takes whole loads of its share of a row and then single 4-byte words, so "
          "that rows like D80's split over 8 lanes as one 16-byte load and one word each (1), or whole loads only (0)"),
      knob::force<&O::faDecodeScatter, O>(
          "FOUNDRY_FA_DECODE_SCATTER",
          "decode: each score of a step summed over its key's lanes once, each lane weighing the scores of one head "
          "and gathering the others' weights (1), or every lane summing and weighing every score (0)"),
      knob::force<&O::faDecodeStepScales, O>(
          "FOUNDRY_FA_DECODE_STEP_SCALES",
          "int8 decode: each scale read once per subgroup step, the step's keys starting at a multiple of the step "
          "within one scale block (1), or once per key (0)"),
      knob::force<&O::faDecodeHalfProducts, O>(
          "FOUNDRY_FA_DECODE_HALF_PRODUCTS",
          "int8 decode with step scales: codes widened to f16 pairs and multiplied in packed f16, each load's or "
          "step's sums scaled and accumulated in f32 (1), or codes widened to f32 (0)"),
      knob::force<&O::faDecodeLazyRescale, O>(
          "FOUNDRY_FA_DECODE_LAZY_RESCALE",
          "subgroup decode: the output's rescale skipped at steps where no lane's running maximum grew, "
          "decided by a subgroup vote (1), or taken at every step (0)"),
      knob::force<&O::faDecodeTensorCores, O>(
          "FOUNDRY_FA_DECODE_TENSOR_CORES",
          "f16, bf16 and int8 decode: 16-key tiles staged per subgroup as the rows and the GQA group's heads as the "
          "columns of 16x8 cooperative-matrix products (int8 K in int8 products, bf16 q, K and V as bf16 operands "
          "where the device and FOUNDRY_GLSLC take them, else bf16 in f16 over a power of two a tile), the softmax "
          "in registers (1; devices with GL_NV_cooperative_matrix and a quad 16x8 accumulator layout), or the "
          "subgroup kernel's products (0); auto: where the tuning table has it (Hopper int8 and f16 rows of 64 and "
          "128, bf16 rows of 128 with bf16 operands, from 2048 keys per workgroup) and no knob of the subgroup "
          "kernel (nor half partials) is set"),
      knob::force<&O::faDecodeGroupRows, O>(
          "FOUNDRY_FA_DECODE_GROUP_ROWS",
          "decode: the query heads of each KV head's GQA group taken as the rows of one prefill query, so the "
          "prefill kernels (cooperative matrices where the device has them) serve the call (1), or the decode "
          "kernels (0)"),
      knob::force<&O::faDecodeInt8Dot, O>(
          "FOUNDRY_FA_DECODE_INT8_DOT",
          "int8 and q8_0 decode: K's codes meet q quantized to two bytes per element in integer dot products (1) "
          "or are widened to f32 (0)"),
      knob::boolean<&O::faDecodeProbe, O>(
          "FOUNDRY_FA_DECODE_PROBE",
          "decode kernels record per subgroup its SM and the device-clock times of its start, its keys' stream, "
          "its hand-over and its end into the workspace tensor probe_records (a measuring build of the kernel: "
          "foundry bench --probe)"),
      knob::force<&O::faDecodeFusedReduce, O>(
          "FOUNDRY_FA_DECODE_FUSED_REDUCE",
          "decode Split-K: the last workgroup of each head group merges the splits (1) or a reduce kernel does (0)"),
      knob::force<&O::faDecodeBatchedMerge, O>(
          "FOUNDRY_FA_DECODE_BATCHED_MERGE",
          "decode Split-K merged in the last workgroup, where its heads' output elements outnumber its invocations: "
          "each invocation issues the loads of a batch of splits for all its elements before it folds any, every "
          "loop unrolled (1), or folds each element's splits in a loop (0); auto: the tuning table (1, and 0 on "
          "lavapipe, whose LLVM compiles the unrolled merge far more slowly)"),
      knob::unsignedOrAuto<&O::faDecodeClaimedKeys, O>(
          "FOUNDRY_FA_DECODE_CLAIMED_KEYS", "auto or 0..65536", 0, 65536, false,
          "decode Split-K merged in the last workgroup (not the scalar kernel): keys "
          "each split leaves to its head group's claimed end, whose steps (on the tensor cores, rounds of tiles) go "
          "to the group's subgroups one at a time as each finishes its own, so that faster splits take more (0: "
          "none; auto: the tuning table)"),
      knob::force<&O::faDecodeTilePairs, O>(
          "FOUNDRY_FA_DECODE_TILE_PAIRS",
          "tensor-core decode: two tiles at a time, their scores and softmax taken as one (1), or one tile at a time "
          "(0)"),
      knob::force<&O::faDecodeValueHalves, O>(
          "FOUNDRY_FA_DECODE_VALUE_HALVES",
          "tensor-core decode of int8 rows of 128: a tile's V staged and multiplied in two halves of its dims, the "
          "next tile's V loaded between them (1), or whole (0)"),
      knob::force<&O::faDecodeValueRegisters, O>(
          "FOUNDRY_FA_DECODE_VALUE_REGISTERS",
          "tensor-core decode of int8 rows of 128: V never staged, each lane building its fragments of V^T from its "
          "own loads (1), or V staged in shared memory (0); needs the device's 16x16 f16 layout from the probe"),
      knob::force<&O::decodeReplay, O>(
          "FOUNDRY_DECODE_REPLAY",
          "foundry run: record a decode token's dispatches once and replay them with new parameters (1) or record "
          "every token (0); auto: replay on GPUs, record every token on CPU drivers (lavapipe), where replay was "
          "not faster"),
  };
  return table;
}

AttentionOptions AttentionOptions::fromEnvironment(const std::map<std::string, std::string>& env) {
  return Options::fromEnvironment(env).attention;
}

}  // namespace foundry
