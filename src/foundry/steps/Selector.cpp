#include "foundry/steps/Selector.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"
#include "foundry/steps/TuningTable.h"

namespace foundry {

namespace {

// q, K and V all bf16: the calls that bf16 cooperative-matrix operands serve as stored.
bool allBf16(const AttentionProblem& p) { return p.dtype == DType::BF16 && p.qType() == DType::BF16; }

std::uint32_t ceilDiv(std::uint64_t a, std::uint64_t b) { return static_cast<std::uint32_t>((a + b - 1) / b); }

std::uint64_t partialBytes(const AttentionProblem& p, std::uint32_t splits) {
  const std::uint64_t rows = std::uint64_t(p.batch) * p.nHeads * p.qLen * splits;
  return rows * p.vDim() * 4 + rows * 8;
}

// Keeps the Split-K scratch within what one storage buffer can bind.
std::uint32_t capSplitsToScratch(const AttentionProblem& p, const DeviceInfo& device, std::uint32_t splits) {
  while (splits > 1 && partialBytes(p, splits) > device.maxStorageBufferRange) --splits;
  return splits;
}

// At least enough splits of `keys` that none holds more than `most` keys (0: no limit). A count the
// user forced (`knob`, `forced`) that leaves more is refused, naming the count that would do.
void splitsWithinLoopLimit(std::uint32_t keys, std::uint32_t most, std::uint32_t& wanted, std::string& reason,
                           const char* knob, std::optional<std::uint32_t> forced, const DeviceInfo& device,
                           const AttentionOptions& o) {
  if (most == 0 || keys <= std::uint64_t(most) * wanted) return;
  const std::uint32_t needed = ceilDiv(keys, most);
  if (knob) {
    throw UserError(o.fieldOf(knob),
                    fmt::format("{} cannot be used here: it leaves up to {} of the call's {} keys to one workgroup, "
                                "and device '{}' ends a shader invocation's loops after {} passes in all (llvmpipe's "
                                "loop limit), which this kernel reaches past {} keys; accepted on this device: {} "
                                "or more splits, or the knob unset",
                                forced.value_or(1), ceilDiv(keys, wanted), keys,
                                device.name, device.loopLimit, most, needed));
  }
  wanted = needed;
  reason += fmt::format("; at least {} splits: the kernel reaches the device's loop limit ({} passes) past {} keys",
                        needed, device.loopLimit, most);
}

// Where the Split-K scratch could not hold the splits the loop limit asks for.
void requireWithinLoopLimit(const AttentionPlan& plan, std::uint32_t most, const DeviceInfo& device) {
  if (most == 0 || plan.kvChunk <= most) return;
  throw UnsupportedError(fmt::format("device '{}' ends a shader invocation's loops after {} passes, so one workgroup "
                                     "takes at most {} keys here, but the Split-K partials of enough splits do not fit "
                                     "in one storage buffer of {} bytes ({} splits of {} keys fit)",
                                     device.name, device.loopLimit, most, device.maxStorageBufferRange, plan.splits,
                                     plan.kvChunk));
}

// A forced split count is a request for every call of a run: a call with too few keys for it (splits
// are whole steps and never empty) or too small a scratch buffer takes fewer, and its reason says so.
std::string forcedSplitsNote(std::optional<std::uint32_t> forced, std::uint32_t splits, std::uint32_t keys,
                             std::uint32_t granule) {
  if (!forced || *forced == splits) return "";
  return fmt::format("={} asked, {} made: the call's {} keys in whole steps of {} keys, no split empty, the partials "
                     "within one storage buffer",
                     *forced, splits, keys, granule);
}

[[noreturn]] void rejectKnob(const AttentionOptions& o, const char* knob, std::uint32_t value, const std::string& why,
                             const std::string& accepted) {
  throw UserError(o.fieldOf(knob), fmt::format("{} cannot be used here: {}; accepted on this device: {}", value, why, accepted));
}

// Sets one of the variant's switches where `wanted` and the variant stays usable: true if set. A knob
// forced on is refused with the reason it cannot be (`blocked`: why it never applies to this call).
bool takeDecodeFlag(DecodeVariant& v, bool DecodeVariant::*flag, const char* knob, Force force, bool wanted,
                    const std::string& blocked, std::uint32_t subgroupSize, const AttentionOptions& o) {
  if (!wanted) return false;
  std::string reason = blocked;
  if (reason.empty()) {
    DecodeVariant c = v;
    c.*flag = true;
    reason = c.unusableReason(subgroupSize);
    if (reason.empty()) {
      v = c;
      return true;
    }
  }
  if (force == Force::On) rejectKnob(o, knob, 1, reason, "auto, 0");
  return false;
}

// Whether a switch is asked for: its knob forced on, or left to auto where the tuning table sets it and
// the call can take it (`fits`).
bool switchWanted(Force force, std::uint32_t tuned, bool fits) {
  return force == Force::On || (force == Force::Auto && tuned != 0 && fits);
}

// Where a switch that was taken came from: its knob where forced on, else the tuning table's row for `field`.
std::string switchSource(Force force, const char* knob, const Tuning& tune, std::string_view field) {
  return force == Force::On ? std::string(knob) : tune.sourceOf(field);
}

// Replaces the value and reason of an earlier decision that a later constraint changed.
void revise(std::vector<Decision>& why, const std::string& what, std::string value, std::string reason) {
  for (auto& d : why) {
    if (d.what == what) d.value = value, d.reason = reason;
  }
}

AttentionPlan decodeChoices(const AttentionProblem& p, const DeviceInfo& device, const AttentionOptions& o) {
  AttentionPlan plan;
  plan.decode = true;
  auto& v = plan.decodeVariant;
  auto& why = plan.decisions;
  const std::uint32_t sg = device.subgroupSize;
  const Tuning tune = tuningFor(device, p.headDim, p.dtype);
  v.headDim = p.headDim;
  if (!p.plainValues()) v.valueDim = p.vDim();
  v.dtype = p.dtype;
  if (p.qType() != p.dtype) v.queryType = p.qType();
  if (p.oType() != p.dtype) v.outputType = p.oType();
  v.strideAlign = p.kvAlign;
  v.pageSize = p.pageSize;
  v.heads = Selector::decodeHeadsPerWorkgroup(p.group());
  if (o.faDecodeHeads) {
    if (p.group() % *o.faDecodeHeads != 0) {
      rejectKnob(o, "FOUNDRY_FA_DECODE_HEADS", *o.faDecodeHeads,
                 fmt::format("the heads of a workgroup share one KV head, and {} does not divide the GQA group of {}",
                             *o.faDecodeHeads, p.group()),
                 fmt::format("a divisor of {}", p.group()));
    }
    v.heads = *o.faDecodeHeads;
    why.push_back({"heads per workgroup", std::to_string(v.heads), "FOUNDRY_FA_DECODE_HEADS"});
  } else if (tune.decodeHeads && p.group() % tune.decodeHeads == 0 && tune.decodeHeads < v.heads) {
    v.heads = tune.decodeHeads;
    why.push_back({"heads per workgroup", std::to_string(v.heads),
                   fmt::format("GQA group of {}: fewer q and output registers per lane, each K/V row read by {} "
                               "workgroups; {}", p.group(), p.group() / v.heads, tune.sourceOf("decodeHeads"))});
  } else {
    why.push_back({"heads per workgroup", std::to_string(v.heads),
                   fmt::format("GQA group of {}: one workgroup reads each K/V element once for {} query heads",
                               p.group(), v.heads)});
  }

  v.scalar = o.faDecodeScalar || !device.subgroupShuffle;
  why.push_back({"variant", v.scalar ? "scalar" : "subgroup",
                 o.faDecodeScalar ? "FOUNDRY_FA_DECODE_SCALAR=1"
                                  : (v.scalar ? "the device has no subgroup shuffles" : "subgroup shuffles available")});
  // Before the widths and steps are chosen: the registers q leaves free are what they are chosen from.
  v.queryShared = !v.scalar && (o.faDecodeQueryShared == Force::Auto ? tune.decodeQueryShared != 0
                                                                      : o.faDecodeQueryShared == Force::On);
  if (!v.scalar) {
    why.push_back({"q", v.queryShared ? "shared memory" : "registers",
                   o.faDecodeQueryShared != Force::Auto ? std::string("FOUNDRY_FA_DECODE_Q_SHARED")
                                                        : tune.sourceOf("decodeQueryShared")});
  }
  // Integer dot products for quantized K, where the device and the variant can take them.
  const std::string noInt8Dot =
      !quantized(p.dtype) ? fmt::format("the K/V cache is {}, not int8 or q8_0", dtypeName(p.dtype))
      : !device.int8Dot   ? fmt::format("device '{}' has no integer dot products (shaderIntegerDotProduct)", device.name)
      : v.scalar          ? std::string("the scalar decode variant widens every code")
      : v.queryShared     ? std::string("q is read from shared memory (FOUNDRY_FA_DECODE_Q_SHARED)")
                          : std::string();
  if (o.faDecodeInt8Dot == Force::On && !noInt8Dot.empty()) {
    rejectKnob(o, "FOUNDRY_FA_DECODE_INT8_DOT", 1, noInt8Dot, "auto, 0");
  }
  v.int8Dot = noInt8Dot.empty() &&
              (o.faDecodeInt8Dot == Force::Auto ? tune.decodeInt8Dot != 0 : o.faDecodeInt8Dot == Force::On);

  // Lanes per key and the width of their loads: every power-of-two split of the subgroup whose lanes
  // divide head_dim (or, with idle lanes, cover it in whole loads; or, with tail words, divide it into
  // whole loads and words), preferring the widest loads, then the tuned elements per lane (few enough
  // registers, few enough shuffles per key), then the fewest idle lanes. A knob fixes its side of the
  // choice.
  v.vecWidth = o.faDecodeVectorWidth.value_or(v.scalar ? 1 : tune.decodeVecWidth);
  if (o.faDecodeKeysPerWarp) v.keysPerWarp = *o.faDecodeKeysPerWarp;
  const bool idleAllowed = !v.scalar && (o.faDecodeIdleLanes == Force::Auto ? tune.decodeIdleLanes != 0
                                                                             : o.faDecodeIdleLanes == Force::On);
  const bool tailAllowed = !v.scalar && (o.faDecodeTailWords == Force::Auto ? tune.decodeTailWords != 0
                                                                             : o.faDecodeTailWords == Force::On);
  const bool layoutForced = o.faDecodeIdleLanes == Force::On || o.faDecodeTailWords == Force::On;
  if (!v.scalar && (!(o.faDecodeKeysPerWarp && o.faDecodeVectorWidth) || layoutForced)) {
    std::optional<DecodeVariant> best;
    auto distance = [&](const DecodeVariant& x) {
      const std::uint32_t e = x.elemsPerLane(sg), aim = tune.decodeLaneElems;
      return e > aim ? e - aim : aim - e;
    };
    // Row layouts as (idle lanes, tail words): a knob that asks for one leaves only that one.
    std::vector<std::pair<bool, bool>> layouts;
    if (!layoutForced) layouts.emplace_back(false, false);
    if (idleAllowed && o.faDecodeTailWords != Force::On) layouts.emplace_back(true, false);
    if (tailAllowed && o.faDecodeIdleLanes != Force::On) layouts.emplace_back(false, true);
    std::vector<std::uint32_t> widths;
    for (std::uint32_t w = o.faDecodeVectorWidth.value_or(tune.decodeVecWidth); w >= 1; w /= 2) {
      widths.push_back(w);
      if (o.faDecodeVectorWidth) break;
    }
    // A forced unroll first: the split chosen must hold it where some split can; where none can, the
    // split is chosen without it and the knob is refused below. Integer dot products the tuning table
    // asks for are dropped where no split takes them.
    for (const bool dot : {v.int8Dot, false}) {
      for (const std::uint32_t unroll : {o.faDecodeUnroll.value_or(1u), 1u}) {
        for (std::uint32_t kpw = 1; kpw <= sg; kpw *= 2) {
          if (o.faDecodeKeysPerWarp && kpw != *o.faDecodeKeysPerWarp) continue;
          for (std::uint32_t vec : widths) {
            for (const auto& [idleLanes, tailWords] : layouts) {
              DecodeVariant c = v;
              c.keysPerWarp = kpw;
              c.vecWidth = vec;
              c.unroll = unroll;
              c.int8Dot = dot;
              c.idleLanes = idleLanes;
              c.tailWords = tailWords;
              if (!c.unusableReason(sg).empty()) continue;
              if (!best || c.vecWidth > best->vecWidth ||
                  (c.vecWidth == best->vecWidth &&
                   (distance(c) < distance(*best) ||
                    (distance(c) == distance(*best) && c.idleElements(sg) < best->idleElements(sg))))) {
                best = c;
              }
            }
          }
        }
        if (best) break;
      }
      if (best || o.faDecodeInt8Dot == Force::On) break;
    }
    if (best) {
      v.keysPerWarp = best->keysPerWarp, v.vecWidth = best->vecWidth, v.int8Dot = best->int8Dot;
      v.idleLanes = best->idleLanes, v.tailWords = best->tailWords;
    } else if (o.faDecodeTailWords == Force::On) {
      rejectKnob(o, "FOUNDRY_FA_DECODE_TAIL_WORDS", 1,
                 o.faDecodeIdleLanes == Force::On
                     ? std::string("FOUNDRY_FA_DECODE_IDLE_LANES=1 asks for another layout of the same rows")
                     : fmt::format("no split of head_dim {} over a subgroup of {}{} leaves whole loads and then words "
                                   "({} K/V; tail words take f16 or bf16 in loads of 4 or 8)",
                                   p.headDim, sg,
                                   o.faDecodeVectorWidth ? fmt::format(" in loads of {}", *o.faDecodeVectorWidth) : "",
                                   dtypeName(p.dtype)),
                 "auto, 0");
    } else if (o.faDecodeIdleLanes == Force::On) {
      rejectKnob(o, "FOUNDRY_FA_DECODE_IDLE_LANES", 1,
                 fmt::format("no split of head_dim {} over a subgroup of {}{} leaves lanes idle", p.headDim, sg,
                             o.faDecodeVectorWidth ? fmt::format(" in loads of {}", *o.faDecodeVectorWidth) : ""),
                 "auto, 0");
    } else if (o.faDecodeInt8Dot == Force::On) {
      rejectKnob(o, "FOUNDRY_FA_DECODE_INT8_DOT", 1,
                 fmt::format("no split of head_dim {} over a subgroup of {} holds q's bytes and loads of 4 or more "
                             "codes in registers", p.headDim, sg),
                 "auto, 0");
    } else if (!o.faDecodeKeysPerWarp && !o.faDecodeVectorWidth) {
      // No split of head_dim over the subgroup leaves q, o and a K/V row in registers: the scalar
      // variant keeps q in shared memory and takes any head_dim.
      v.scalar = true;
      v.queryShared = v.int8Dot = false;
      v.vecWidth = 1;
      revise(why, "variant", "scalar",
             fmt::format("no split of head_dim {} over a subgroup of {} fits in registers", p.headDim, sg));
      revise(why, "q", "shared memory", "the scalar variant reads q from shared memory");
    }
  }
  if (quantized(p.dtype) && !v.scalar) {
    why.push_back({"K dot products", v.int8Dot ? "integer" : "float",
                   o.faDecodeInt8Dot != Force::Auto ? std::string("FOUNDRY_FA_DECODE_INT8_DOT")
                   : !noInt8Dot.empty()             ? noInt8Dot
                                                    : tune.sourceOf("decodeInt8Dot")});
  }
  why.push_back({"vector width", std::to_string(v.vecWidth),
                 o.faDecodeVectorWidth ? "FOUNDRY_FA_DECODE_VEC"
                 : v.scalar            ? "scalar loads"
                                       : fmt::format("{}-byte K/V loads", v.vecWidth * storageFormat(p.dtype).bytes)});
  why.push_back({"keys per warp", std::to_string(v.keysPerWarp),
                 o.faDecodeKeysPerWarp ? std::string("FOUNDRY_FA_DECODE_KEYS_PER_WARP")
                                       : fmt::format("{} elements of each key per lane with subgroup size {}",
                                                     v.elemsPerLane(sg), sg)});
  if (v.idleLanes) {
    why.push_back({"idle lanes", fmt::format("{} lanes x {} elements for rows of {}", v.lanesPerKey(sg), v.elemsPerLane(sg), v.headDim),
                   switchSource(o.faDecodeIdleLanes, "FOUNDRY_FA_DECODE_IDLE_LANES", tune, "decodeIdleLanes")});
  }
  if (v.tailWords) {
    why.push_back({"tail words",
                   fmt::format("{} lanes x {} elements for rows of {}: whole loads of {}, then words",
                               v.lanesPerKey(sg), v.elemsPerLane(sg), v.headDim, v.vecWidth),
                   switchSource(o.faDecodeTailWords, "FOUNDRY_FA_DECODE_TAIL_WORDS", tune, "decodeTailWords")});
  }

  if (o.faDecodeUnroll) {
    v.unroll = *o.faDecodeUnroll;
    why.push_back({"unroll", std::to_string(v.unroll), "FOUNDRY_FA_DECODE_UNROLL"});
  } else if (!v.scalar) {
    // Loads in flight are what a memory-bound kernel needs, as far as registers hold them.
    v.unroll = tune.decodeUnroll;
    while (v.unroll > 1 && !v.unusableReason(sg).empty()) v.unroll /= 2;
    why.push_back({"unroll", std::to_string(v.unroll),
                   v.unroll == tune.decodeUnroll
                       ? tune.sourceOf("decodeUnroll")
                       : fmt::format("{} K/V rows in flight would not fit in registers", tune.decodeUnroll)});
  }
  // The heads as the columns of tensor-core products: where asked, or where the tuning table has them, no
  // knob of the subgroup kernel is set, and the variant can take the problem (else the subgroup kernel
  // planned above stays).
  const bool tensorForced = o.faDecodeTensorCores == Force::On;
  const bool subgroupKnobs =
      o.faDecodeScalar || o.faDecodeVectorWidth || o.faDecodeKeysPerWarp || o.faDecodeQueryShared == Force::On ||
      o.faDecodeInt8Dot == Force::On || o.faDecodeIdleLanes == Force::On || o.faDecodeTailWords == Force::On ||
      o.faDecodeScatter != Force::Auto || o.faDecodeStepScales != Force::Auto ||
      o.faDecodeHalfProducts != Force::Auto || o.faDecodeLazyRescale != Force::Auto ||
      o.faDecodeTgOut == PartialStorage::Half;
  // bf16 takes the tuning table's tensor cores only with bf16 operands: f16 over a power of two a tile
  // is slower than the subgroup kernel (H200: 93.3-93.7 us against 70.0-88.4 at batch 1 kv 65536 D128).
  const bool bf16Staged = p.dtype == DType::BF16 && !(allBf16(p) && device.coopMat2Bf16);
  const bool tableAsks = o.faDecodeTensorCores == Force::Auto && tune.decodeTensorCores != 0 && !subgroupKnobs;
  if (tableAsks && bf16Staged) {
    why.push_back({"tensor cores", "no",
                   fmt::format("bf16 {}without bf16 operands (the device's VK_KHR_shader_bfloat16 and a glslc that "
                               "compiles GL_EXT_bfloat16: FOUNDRY_GLSLC), f16 over a power of two a tile is slower than "
                               "the subgroup kernel", p.qType() == DType::BF16 ? "" : "K/V with a q of another type ")});
  }
  if (tensorForced || (tableAsks && !bf16Staged)) {
    const bool int8 = p.dtype == DType::I8;
    const std::string blocked = v.scalar ? std::string("the scalar decode variant loads one element at a time")
                                         : DecodeVariant::tensorCoresUnavailable(device, p.dtype);
    DecodeVariant c = v;
    c.tensorCores = true;
    c.keysPerWarp = 1;
    c.vecWidth = 16 / storageFormat(p.dtype).bytes;
    c.queryShared = c.int8Dot = c.idleLanes = c.tailWords = false;
    // bf16 q, K and V multiply as stored where the device and glslc take bf16 operands; otherwise bf16
    // goes through f16 over a power of two a tile.
    c.bf16Operands = p.dtype == DType::BF16 && !bf16Staged;
    // Tiles in flight: 2 where registers hold them (H200, int8 D128 kv 65536, 8 subgroups: 51.6 us; one
    // tile 59.3 and 4 tiles 62.2 before the scales were loaded once for several tiles); bf16 in f16, whose
    // staging converts each tile, one (H200, D128 kv 65536, 2026-11-29: 93.8 us against 104.9).
    if (!o.faDecodeUnroll) {
      c.unroll = bf16Staged ? 1 : 2;
      while (c.unroll > 1 && !c.unusableReason(sg).empty()) c.unroll /= 2;
    }
    const std::string reason = !blocked.empty() ? blocked : c.unusableReason(sg);
    if (!reason.empty() && tensorForced) rejectKnob(o, "FOUNDRY_FA_DECODE_TENSOR_CORES", 1, reason, "auto, 0");
    if (reason.empty()) {
      v = c;
      // The lane split chosen above is not this kernel's: its decisions say what the kernel does instead.
      std::erase_if(why, [](const Decision& d) {
        return d.what == "idle lanes" || d.what == "tail words" || d.what == "K dot products";
      });
      const std::string tiles = "the tensor-core kernel's 16-key tiles";
      revise(why, "q", "shared memory", tiles + ": Q staged once as fragments");
      revise(why, "vector width", std::to_string(v.vecWidth), tiles + ": 16-byte loads");
      revise(why, "keys per warp", "1", tiles + ": a subgroup takes whole tiles");
      revise(why, "unroll", std::to_string(v.unroll),
             o.faDecodeUnroll            ? std::string("FOUNDRY_FA_DECODE_UNROLL")
             : bf16Staged ? tiles + ": bf16, converted as staged, 1 in flight"
                          : tiles + ": 2 in flight where registers hold them");
      why.push_back({"tensor cores",
                     fmt::format("{}-key tiles as rows, the {} heads as columns of 16x8 products ({} K)",
                                 DecodeVariant::kTensorTileKeys, v.heads,
                                 int8             ? "int8 x int8"
                                 : c.bf16Operands ? "bf16 x bf16, as stored"
                                 : bf16Staged     ? "bf16 in f16 over a power of two a tile"
                                                  : "f16"),
                     tensorForced ? std::string("FOUNDRY_FA_DECODE_TENSOR_CORES") : tune.sourceOf("decodeTensorCores")});
    }
  }
  if (o.faDecodeWarps) {
    v.warps = *o.faDecodeWarps;
    why.push_back({"warps", std::to_string(v.warps), "FOUNDRY_FA_DECODE_WARPS"});
  } else {
    v.warps = std::max<std::uint32_t>(1, std::min<std::uint32_t>(tune.decodeWarps, device.maxWorkgroupInvocations / sg));
    why.push_back({"warps", std::to_string(v.warps), tune.sourceOf("decodeWarps")});
  }
  if (v.workgroupSize(sg) > device.maxWorkgroupInvocations) {
    rejectKnob(o, "FOUNDRY_FA_DECODE_WARPS", v.warps,
               fmt::format("{} invocations exceed the device's {}", v.workgroupSize(sg), device.maxWorkgroupInvocations),
               fmt::format("1..{}", device.maxWorkgroupInvocations / sg));
  }
  if (!v.scalar) {
    if (const std::string reason = v.unusableReason(sg); !reason.empty()) {
      DecodeVariant noUnroll = v;
      noUnroll.unroll = 1;
      if (o.faDecodeUnroll && noUnroll.unusableReason(sg).empty()) {
        rejectKnob(o, "FOUNDRY_FA_DECODE_UNROLL", v.unroll, reason,
                   "1, 2, 4, 8 or 16, as far as q, o and the unrolled K/V rows fit in registers");
      }
      if (o.faDecodeKeysPerWarp) {
        rejectKnob(o, "FOUNDRY_FA_DECODE_KEYS_PER_WARP", v.keysPerWarp, reason,
                   fmt::format("powers of two up to {} that leave a multiple of the vector width per lane", sg));
      }
      if (o.faDecodeVectorWidth) {
        rejectKnob(o, "FOUNDRY_FA_DECODE_VEC", v.vecWidth, reason,
                   fmt::format("{} (as far as they divide the elements per lane and the K/V strides)", [&] {
                     std::string widths = "1";
                     const std::uint32_t most = std::min(storageFormat(p.dtype).maxLoadWidth, p.kvAlign);
                     for (std::uint32_t w = 2; w <= most; w *= 2) widths += fmt::format(", {}", w);
                     return widths;
                   }()));
      }
      throw InternalError(fmt::format("decode heuristic chose an unusable variant {}: {}", v.key(), reason));
    }
  }

  // Two tensor-core tiles at a time, and V staged in halves of its dims: where asked, or where the tuning
  // table has them and the variant can take them.
  if (takeDecodeFlag(v, &DecodeVariant::tilePairs, "FOUNDRY_FA_DECODE_TILE_PAIRS", o.faDecodeTilePairs,
                     switchWanted(o.faDecodeTilePairs, tune.decodeTilePairs, v.tensorCores),
                     v.tensorCores ? "" : "the pairs are of the tensor-core kernel's tiles", sg, o)) {
    why.push_back({"tiles", "two at a time: one softmax for 32 keys",
                   switchSource(o.faDecodeTilePairs, "FOUNDRY_FA_DECODE_TILE_PAIRS", tune, "decodeTilePairs")});
  }
  // V's fragments built from each lane's own loads, never staged, where the device's 16x16 f16 layout is known;
  // else (or with the halves forced) V staged, in halves where asked.
  if (takeDecodeFlag(v, &DecodeVariant::valueRegisters, "FOUNDRY_FA_DECODE_VALUE_REGISTERS", o.faDecodeValueRegisters,
                     switchWanted(o.faDecodeValueRegisters, tune.decodeValueRegisters,
                                  v.tensorCores && o.faDecodeValueHalves != Force::On),
                     !v.tensorCores ? "V's fragments are of the tensor-core kernel's tiles"
                                    : DecodeVariant::valueRegistersUnavailable(device),
                     sg, o)) {
    why.push_back({"values", "never staged: each lane widens its own loads into its fragments of V^T",
                   switchSource(o.faDecodeValueRegisters, "FOUNDRY_FA_DECODE_VALUE_REGISTERS", tune,
                                "decodeValueRegisters")});
  }
  if (takeDecodeFlag(v, &DecodeVariant::valueHalves, "FOUNDRY_FA_DECODE_VALUE_HALVES", o.faDecodeValueHalves,
                     switchWanted(o.faDecodeValueHalves, tune.decodeValueHalves, v.tensorCores && !v.valueRegisters),
                     v.tensorCores ? "" : "the halves are of the tensor-core kernel's V tiles", sg, o)) {
    why.push_back({"values", "staged in two halves of their dims, the next tile's loaded between them",
                   switchSource(o.faDecodeValueHalves, "FOUNDRY_FA_DECODE_VALUE_HALVES", tune, "decodeValueHalves")});
  }
  if (o.faDecodeTgOut == PartialStorage::Half && !device.fp16Arithmetic) {
    throw UserError(o.fieldOf("FOUNDRY_FA_DECODE_TG_OUT"), fmt::format("half cannot be used here: device '{}' has no fp16 "
                                                            "arithmetic; accepted on this device: auto, float",
                                                            device.name));
  }
  if (o.faDecodeTgOut == PartialStorage::Half && v.scalar) {
    throw UserError(o.fieldOf("FOUNDRY_FA_DECODE_TG_OUT"), "half cannot be used here: the scalar decode variant accumulates its "
                                                "outputs in float partials; accepted with it: auto, float");
  }
  if (o.faDecodeTgOut == PartialStorage::Half && v.tensorCores) {
    throw UserError(o.fieldOf("FOUNDRY_FA_DECODE_TG_OUT"), "half cannot be used here: the tensor-core decode keeps its "
                                                "partials in float over its staging rows; accepted with it: auto, float");
  }
  if (o.faDecodeTgOut) {
    v.partial = *o.faDecodeTgOut;
    why.push_back({"partial storage", std::string(partialStorageName(v.partial)), "FOUNDRY_FA_DECODE_TG_OUT"});
  } else {
    v.partial = PartialStorage::Float;
    // Half partials only for f16 inputs: for f32 they would cost f32 attention its accuracy.
    if (v.sharedBytes(sg) > device.maxSharedMemoryBytes && device.fp16Arithmetic && p.dtype == DType::F16 &&
        !v.scalar && !v.tensorCores) {
      v.partial = PartialStorage::Half;
    }
    why.push_back({"partial storage", std::string(partialStorageName(v.partial)),
                   v.partial == PartialStorage::Float ? "float partials fit in shared memory"
                                                      : "float partials would not fit in shared memory"});
  }
  if (!o.faDecodeWarps && !v.scalar && v.sharedBytes(sg) > device.maxSharedMemoryBytes) {
    // Each subgroup keeps its own partial rows: fewer subgroups fit where half partials cannot help.
    // (The scalar variant keeps one partial for the workgroup: fewer heads are what helps there.)
    while (v.warps > 1 && v.sharedBytes(sg) > device.maxSharedMemoryBytes) v.warps /= 2;
    revise(why, "warps", std::to_string(v.warps),
           fmt::format("the {} partials of more subgroups would not fit in {} bytes of shared memory",
                       partialStorageName(v.partial), device.maxSharedMemoryBytes));
  }
  if (v.sharedBytes(sg) > device.maxSharedMemoryBytes && v.heads > 1 && !o.faDecodeWarps) {
    // Wide heads: fewer query heads per workgroup (each then reads its K/V head itself).
    while (v.heads > 1 && v.sharedBytes(sg) > device.maxSharedMemoryBytes) {
      do --v.heads; while (p.group() % v.heads != 0);
    }
    revise(why, "heads per workgroup", std::to_string(v.heads),
           fmt::format("the q and partial rows of head_dim {} for more heads would not fit in {} bytes of shared memory",
                       p.headDim, device.maxSharedMemoryBytes));
  }
  if (v.sharedBytes(sg) > device.maxSharedMemoryBytes && !o.faDecodeWarps) {
    throw UnsupportedError(fmt::format("decode of head_dim {} needs {} bytes of shared memory with one head and {} "
                                       "subgroup(s) per workgroup; device '{}' has {}; SdpaReferenceStep handles this "
                                       "shape", p.headDim, v.sharedBytes(sg), v.warps, device.name,
                                       device.maxSharedMemoryBytes));
  }
  if (v.sharedBytes(sg) > device.maxSharedMemoryBytes) {
    const bool halfHelps =
        v.partial == PartialStorage::Float && device.fp16Arithmetic && p.dtype == DType::F16 && !v.scalar &&
        !v.tensorCores;
    throw UserError(o.fieldOf("FOUNDRY_FA_DECODE_WARPS"),
                    fmt::format("decode with {} warps, {} heads per workgroup and {} partials needs {} bytes of shared "
                                "memory; device '{}' has {}. Use fewer warps{}",
                                v.warps, v.heads, partialStorageName(v.partial), v.sharedBytes(sg), device.name,
                                device.maxSharedMemoryBytes, halfHelps ? " or FOUNDRY_FA_DECODE_TG_OUT=half" : ""));
  }
  // Last: the heads per workgroup and the steps are settled, and each lane must keep scores of one head.
  if (takeDecodeFlag(v, &DecodeVariant::scatter, "FOUNDRY_FA_DECODE_SCATTER", o.faDecodeScatter,
                     switchWanted(o.faDecodeScatter, tune.decodeScatter, true),
                     v.scalar ? "the scalar decode variant shares no scores between lanes" : "", sg, o)) {
    why.push_back({"scores", fmt::format("scattered: {} lanes per key, {} per head", v.lanesPerKey(sg),
                                         v.lanesPerKey(sg) / v.heads),
                   switchSource(o.faDecodeScatter, "FOUNDRY_FA_DECODE_SCATTER", tune, "decodeScatter")});
  }
  // The step is settled. int8 products in packed f16 (the tuning table, or the knob) need each step's
  // keys in one scale block, so that a step's weighted codes share one scale.
  const std::string notInt8 =
      v.scalar ? "the scalar decode variant loads one element at a time"
      : quantized(v.dtype) ? ""
                           : fmt::format("the K/V cache is {}, not int8", dtypeName(v.dtype));
  const std::string noHalf = !notInt8.empty() ? notInt8 : device.fp16Arithmetic ? "" : "the device has no f16 arithmetic";
  const bool halfWanted = switchWanted(o.faDecodeHalfProducts, tune.decodeHalfProducts, noHalf.empty());
  if (takeDecodeFlag(v, &DecodeVariant::stepScales, "FOUNDRY_FA_DECODE_STEP_SCALES", o.faDecodeStepScales,
                     o.faDecodeStepScales == Force::On || (o.faDecodeStepScales == Force::Auto && halfWanted), notInt8,
                     sg, o)) {
    why.push_back({"scales", fmt::format("once per step of {} keys", v.stepKeys()),
                   o.faDecodeStepScales == Force::On ? std::string("FOUNDRY_FA_DECODE_STEP_SCALES")
                                                     : std::string("for the products in f16")});
  }
  if (takeDecodeFlag(v, &DecodeVariant::halfProducts, "FOUNDRY_FA_DECODE_HALF_PRODUCTS", o.faDecodeHalfProducts,
                     halfWanted, noHalf, sg, o)) {
    why.push_back({"products", "packed f16, scaled and summed in f32",
                   switchSource(o.faDecodeHalfProducts, "FOUNDRY_FA_DECODE_HALF_PRODUCTS", tune,
                                "decodeHalfProducts")});
  }
  if (takeDecodeFlag(v, &DecodeVariant::lazyRescale, "FOUNDRY_FA_DECODE_LAZY_RESCALE", o.faDecodeLazyRescale,
                     switchWanted(o.faDecodeLazyRescale, tune.decodeLazyRescale, device.subgroupVote),
                     v.scalar               ? "the scalar decode variant keeps one running maximum per workgroup"
                     : !device.subgroupVote ? "the device has no subgroup vote"
                                            : "",
                     sg, o)) {
    why.push_back({"rescale", "skipped where no maximum grew (a subgroup vote)",
                   switchSource(o.faDecodeLazyRescale, "FOUNDRY_FA_DECODE_LAZY_RESCALE", tune, "decodeLazyRescale")});
  }
  v.probe = o.faDecodeProbe;
  if (v.probe) why.push_back({"probe", "on", "FOUNDRY_FA_DECODE_PROBE: a measuring build of the kernel"});
  if (v.tensorCores && o.faDecodeTensorCores == Force::Auto) {
    AttentionOptions subgroup = o;
    subgroup.faDecodeTensorCores = Force::Off;
    subgroup.faDecodeTilePairs = Force::Auto;  // the tensor-core kernel's alone
    subgroup.faDecodeValueHalves = Force::Auto;
    plan.shortRanges = std::make_shared<const AttentionPlan>(decodeChoices(p, device, subgroup));
  }

  return plan;
}

// The claimed end (DecodeVariant::claims): each split's own chunk shortened by the keys the knob or the
// tuning table asks, in whole granules; the keys past all the chunks go a step at a time to the subgroups
// that finish theirs first. A subgroup might claim every step of the end, so its passes are checked
// against the device's loop limit as if its workgroup's range held the end `warps` times over.
void fitClaimedEnd(AttentionPlan& plan, const DeviceInfo& device, const Tuning& tune, const AttentionOptions& o,
                   std::uint32_t most, std::uint32_t keys) {
  auto& v = plan.decodeVariant;
  const std::uint32_t wanted = o.faDecodeClaimedKeys.value_or(tune.decodeClaimedKeys);
  if (wanted == 0) return;
  const bool forced = o.faDecodeClaimedKeys.has_value();
  const std::uint32_t granule = v.keyGranule(device.subgroupSize);
  const std::uint32_t own = plan.kvChunk > wanted ? (plan.kvChunk - wanted) / granule * granule : 0;
  const std::uint64_t end = std::uint64_t(keys) - std::min<std::uint64_t>(keys, std::uint64_t(own) * plan.splits);
  std::string no = v.scalar ? "the scalar decode kernel claims no keys"
                   : !v.fusedReduce           ? "the keys are claimed only where the last workgroup merges the splits"
                   : own == 0
                       ? fmt::format("each split's {} keys leave none of its own after {} claimed, in steps of {}",
                                     plan.kvChunk, wanted, granule)
                   : most != 0 && own + end * v.warps > most
                       ? fmt::format("a subgroup that claimed the whole end of {} keys would pass device '{}''s loop "
                                     "limit ({} keys a workgroup)", end, device.name, most)
                       : "";
  if (!no.empty()) {
    if (forced) rejectKnob(o, "FOUNDRY_FA_DECODE_CLAIMED_KEYS", wanted, no, "0 or auto");
    return;
  }
  v.claims = true;
  plan.kvChunk = own;
  plan.decisions.push_back(
      {"claimed end",
       fmt::format("{} keys a split of its own, then {} keys of the head group claimed a step of {} at a time", own,
                   end, v.stepKeys()),
       forced ? std::string("FOUNDRY_FA_DECODE_CLAIMED_KEYS") : tune.sourceOf("decodeClaimedKeys")});
}

AttentionPlan fitDecode(const AttentionPlan& variant, const AttentionProblem& p, const DeviceInfo& device,
                        const AttentionOptions& o) {
  AttentionPlan plan = variant;
  auto& v = plan.decodeVariant;
  auto& why = plan.decisions;
  const std::uint32_t sg = device.subgroupSize;
  const Tuning tune = tuningFor(device, p.headDim, p.dtype);
  // Split-K: enough workgroups to fill the device, but no split shorter than a few steps of keys. The
  // splits divide the keys the query can see (a window's, not the whole cache).
  const std::uint32_t base = p.batch * (p.nHeads / v.heads);
  const std::uint32_t granule = v.keyGranule(sg);
  const std::uint32_t minChunk = std::max<std::uint32_t>(tune.decodeSplitKeys, granule);
  const std::uint32_t keys = plan.visibleKeys = Selector::visibleKeys(p, 1, 1);
  const std::string over = keys < p.kvLen ? fmt::format("; over the {} visible keys of {}", keys, p.kvLen) : "";
  std::uint32_t wanted = 1;
  std::string reason;
  if (o.faDecodeSplitK) {
    wanted = *o.faDecodeSplitK;
    reason = "FOUNDRY_FA_DECODE_SPLIT_K";
  } else {
    // One wave of workgroups, one per compute unit, never a partial extra one (the H200 sweeps,
    // docs/performance.md: a second wave, full or partial, was never faster).
    const std::uint32_t fill = std::max<std::uint32_t>(1, device.computeUnits / base);
    wanted = std::max<std::uint32_t>(1, std::min(fill, keys / minChunk));
    reason = fmt::format("{} workgroups without a split for {} compute units; at least {} keys per split{}", base,
                         device.computeUnits, minChunk, over);
  }
  const std::uint64_t hookPasses = Selector::hookLoopPassesPerKey(plan, p);
  const std::uint32_t most = Selector::mostKeysPerWorkgroup(plan, device, hookPasses);
  splitsWithinLoopLimit(keys, most, wanted, reason, o.faDecodeSplitK ? "FOUNDRY_FA_DECODE_SPLIT_K" : nullptr,
                        o.faDecodeSplitK, device, o);
  wanted = capSplitsToScratch(p, device, wanted);
  Selector::splitKeys(keys, wanted, granule, plan.splits, plan.kvChunk);
  requireWithinLoopLimit(plan, most, device);
  // The tuning table's tensor cores only over long enough ranges per workgroup: below, the subgroup
  // kernel's plan for the same call.
  if (variant.shortRanges && plan.kvChunk < tune.decodeTensorCoresKeys) {
    AttentionPlan fitted = fitDecode(*variant.shortRanges, p, device, o);
    fitted.decisions.push_back(
        {"tensor cores", "no",
         fmt::format("{} keys per workgroup, under {}; {}", plan.kvChunk, tune.decodeTensorCoresKeys,
                     tune.sourceOf("decodeTensorCoresKeys"))});
    return fitted;
  }
  // Long ranges per workgroup: wider loads and more steps in flight (a longer pipeline, slower to
  // fill on short ranges). The register check is the variant's own.
  DecodeVariant wide = v;
  wide.vecWidth = tune.wideDecodeVec, wide.unroll = tune.wideDecodeUnroll;
  if (tune.wideDecodeKeys > 0 && plan.kvChunk >= tune.wideDecodeKeys && !o.faDecodeUnroll && !o.faDecodeVectorWidth &&
      !v.scalar && !v.tensorCores && wide.unusableReason(sg).empty()) {
    // Kept where its chunks stay within the device's loop limit.
    const DecodeVariant narrow = v;
    v = wide;
    std::uint32_t splits = 0, chunk = 0;
    Selector::splitKeys(keys, wanted, v.keyGranule(sg), splits, chunk);
    const std::uint32_t mostWide = Selector::mostKeysPerWorkgroup(plan, device, hookPasses);
    if (mostWide != 0 && chunk > mostWide) {
      v = narrow;
    } else {
      plan.splits = splits, plan.kvChunk = chunk;
      const std::string reasonWide =
          fmt::format("at least {} keys per workgroup; {}", tune.wideDecodeKeys, tune.sourceOf("wideDecodeKeys"));
      revise(why, "vector width", std::to_string(wide.vecWidth), reasonWide);
      revise(why, "unroll", std::to_string(wide.unroll), reasonWide);
    }
  }
  v.split = plan.splits > 1;
  why.push_back({"split-k", std::to_string(plan.splits),
                 reason + forcedSplitsNote(o.faDecodeSplitK, plan.splits, keys, v.keyGranule(sg))});
  if (v.split) {
    // Merging in the last workgroup saves a dispatch and a barrier, but every workgroup's hand-over
    // (a device-wide fence and an atomic) holds its compute unit a little longer: a loss once later
    // workgroups wait for that unit (the H200 sweep, docs/performance.md).
    const std::uint64_t workgroups = std::uint64_t(plan.splits) * base;
    const bool oneWave = workgroups <= device.computeUnits;
    v.fusedReduce = o.faDecodeFusedReduce == Force::On || (o.faDecodeFusedReduce == Force::Auto && oneWave);
    why.push_back({"split-k merge", v.fusedReduce ? "last workgroup" : "reduce kernel",
                   o.faDecodeFusedReduce != Force::Auto ? std::string("FOUNDRY_FA_DECODE_FUSED_REDUCE")
                   : oneWave ? fmt::format("{} workgroups in one wave: the last of each head group merges, one dispatch",
                                           workgroups)
                             : fmt::format("{} workgroups for {} compute units: more than one wave", workgroups,
                                           device.computeUnits)});
  }
  if (v.fusedReduce) {
    // Batched where the tuning table has it (on the H200, 1% faster at D80 and D128 with 4 heads on 256
    // invocations, docs/performance.md, "The Split-K merge's loads"); it applies only where an invocation
    // merges several elements (at D64 there, where each merges one, it was 4% slower).
    const std::uint32_t elems = v.mergeElemsPerInvocation(sg);
    takeDecodeFlag(v, &DecodeVariant::batchedMerge, "FOUNDRY_FA_DECODE_BATCHED_MERGE", o.faDecodeBatchedMerge,
                   switchWanted(o.faDecodeBatchedMerge, tune.decodeBatchedMerge, elems > 1), "", sg, o);
    // The merge runs after the last workgroup's own range, in the eighth of the loop limit that the
    // ranges leave (DeviceInfo::loopPassBudget).
    const std::uint64_t passes = v.mergePasses(plan.splits, sg);
    const std::uint64_t room = device.loopLimit - device.loopPassBudget();
    if (device.loopLimit != 0 && passes > room) {
      if (o.faDecodeFusedReduce == Force::On) {
        rejectKnob(o, "FOUNDRY_FA_DECODE_FUSED_REDUCE", 1,
                   fmt::format("the last workgroup's merge of {} splits makes {} loop passes, and device '{}' leaves "
                               "it {} of its loop limit ({})",
                               plan.splits, passes, device.name, room, device.loopLimit),
                   "auto, 0, or fewer splits");
      }
      v.fusedReduce = v.batchedMerge = false;
      revise(why, "split-k merge", "reduce kernel",
             fmt::format("the last workgroup's merge of {} splits would make {} loop passes, over the {} device '{}' "
                         "leaves it", plan.splits, passes, room, device.name));
    } else {
      why.push_back({"split-k merge loads",
                     v.batchedMerge
                         ? fmt::format("batched: {} elements an invocation, a batch of splits loaded before any fold",
                                       elems)
                         : fmt::format("each of {} element(s) an invocation folds its splits in a loop", elems),
                     elems < 2                                ? std::string("one element an invocation: nothing to batch")
                     : o.faDecodeBatchedMerge != Force::Auto ? std::string("FOUNDRY_FA_DECODE_BATCHED_MERGE")
                                                              : tune.sourceOf("decodeBatchedMerge")});
    }
  }
  fitClaimedEnd(plan, device, tune, o, Selector::mostKeysPerWorkgroup(plan, device, hookPasses), keys);
  // With a reduce kernel the partials' merge writes the LSE, like the output.
  v.lse = p.lse && (!v.split || v.fusedReduce);
  plan.grid = {plan.splits, p.nHeads / v.heads, p.batch};
  plan.reduceWorkgroup = std::max<std::uint32_t>(64, sg);
  plan.reduceGrid = {p.nHeads, 1, p.batch};
  plan.scratchBytes = v.split ? partialBytes(p, plan.splits) : 0;
  if (v.fusedReduce) plan.scratchBytes += std::uint64_t(base) * 4 * v.splitCounters();
  return plan;
}

AttentionPlan prefillChoices(const AttentionProblem& p, const DeviceInfo& device, const AttentionOptions& o) {
  if (!p.plainValues()) {
    throw UnsupportedError(fmt::format("prefill takes V rows like K's (value_dim {} packed); this call has value_dim {} "
                                       "in rows of {}: the decode kernels (q_len 1) and SdpaReferenceStep take it",
                                       p.headDim, p.vDim(), p.vRow()));
  }
  AttentionPlan plan;
  plan.decode = false;
  auto& v = plan.prefillVariant;
  auto& why = plan.decisions;
  const std::uint32_t sg = device.subgroupSize;
  const Tuning tune = tuningFor(device, p.headDim, p.dtype);
  v.headDim = p.headDim;
  v.dtype = p.dtype;
  if (p.qType() != p.dtype) v.queryType = p.qType();
  if (p.oType() != p.dtype) v.outputType = p.oType();
  v.strideAlign = std::min(p.kvAlign, p.qAlign);
  v.pageSize = p.pageSize;
  // Under a causal mask the last query tiles see the most keys: they go first, the short ones fill
  // the tail of the grid. With heads varying fastest, the longest tiles of all heads go first; but
  // then every KV head is read at once, which pays only while they stay in the cache together.
  v.longestFirst = p.causal;
  v.halfTiles = device.fp16Arithmetic;
  // Workgroups of query tiles of `rows` rows (before any Split-K).
  const auto queryTiles = [&](std::uint32_t rows) { return std::uint64_t(ceilDiv(p.qLen, rows)) * p.nHeads * p.batch; };

  // bf16 q, K and V multiply as they are stored in coopmat2 matrices with bf16 operands: exact products
  // of every bf16 value. Without them bf16 (and f32) go to the subgroup variant, which stages them as
  // f32, where f16 operands would overflow past 65504 and flush the smallest to zero. int8 and q8_0
  // rows are dequantized to f16 as they are staged (docs/attention.md).
  const bool bf16Call = allBf16(p);
  const std::string noBf16Coop2 =
      !bf16Call ? std::string("q, K and V are not all bf16")
      : !device.coopMat2Bf16
          ? fmt::format("device '{}' has no bf16 operands in coopmat2 matrices here (VK_KHR_shader_bfloat16, and a "
                        "glslc that compiles GL_EXT_bfloat16: FOUNDRY_GLSLC)", device.name)
      : o.faPrefillCoopMat2 == Force::Off
          ? std::string("FOUNDRY_FA_PREFILL_COOPMAT2 is 0, and bf16 operands exist only in coopmat2 matrices")
          : PrefillVariant::workgroupScopeReason(sg, o.faPrefillLoader == Force::On, o.faPrefillProbe);
  // Why the cooperative-matrix variant cannot take this call, or empty.
  const std::string noCoop =
      !device.hasCoopMat({16, 16, 16, DType::F16, DType::F32})
          ? fmt::format("device '{}' has no 16x16x16 f16 cooperative matrices with f32 accumulation", device.name)
      : bf16Call && !noBf16Coop2.empty() ? fmt::format("bf16 takes the tensor cores in coopmat2 matrices only: {}", noBf16Coop2)
      : !bf16Call && ((p.dtype != DType::F16 && !quantized(p.dtype)) || p.qType() != DType::F16)
          ? fmt::format("device '{}' takes cooperative matrices in f16 (or bf16 q, K and V in coopmat2 matrices) and q "
                        "is {}, K/V {}", device.name, dtypeName(p.qType()), dtypeName(p.dtype))
      : v.strideAlign < 8 ? fmt::format("the cooperative-matrix tiles load 8 elements at once and the q/K/V strides are "
                                        "multiples of {} only", v.strideAlign)
      : p.headDim % 16 != 0   ? fmt::format("head_dim {} is not a multiple of 16, the cooperative matrices' size", p.headDim)
                              : std::string();
  if (o.faPrefillCoopMat == Force::On && !noCoop.empty()) {
    throw UnsupportedError(fmt::format("FOUNDRY_FA_PREFILL_COOPMAT=1 but {}; set it to auto or 0", noCoop));
  }
  v.coopMat = noCoop.empty() && o.faPrefillCoopMat != Force::Off;
  why.push_back({"variant", v.coopMat ? "coopmat" : "subgroup",
                 o.faPrefillCoopMat != Force::Auto ? std::string("FOUNDRY_FA_PREFILL_COOPMAT")
                 : v.coopMat                       ? std::string("the device has 16x16x16 f16 cooperative matrices")
                                                   : noCoop});

  if (!v.coopMat && !device.subgroupArithmetic) {
    // prefill_subgroup.glsl reduces rows with subgroupMax/subgroupAdd; there is no scalar prefill.
    throw UnsupportedError(fmt::format("device '{}' has no subgroup arithmetic, which the subgroup prefill variant "
                                       "needs; SdpaReferenceStep handles prefill on this device",
                                       device.name));
  }
  // GL_NV_cooperative_matrix2 matrices: where the device and the compiler have them, and the tuning table
  // (from coop2Groups workgroups per compute unit) or a knob asks for them. Naming a scope asks for them.
  const std::string noCoop2 =
      !v.coopMat ? std::string("the call does not take the cooperative-matrix variant")
      : !device.coopMat2
          ? fmt::format("device '{}' has no VK_NV_cooperative_matrix2 with workgroup scope here, or no glslc "
                        "compiles it (FOUNDRY_GLSLC, or glslc on PATH where it is unset)", device.name)
      : PrefillVariant::workgroupScopeReason(sg, o.faPrefillLoader == Force::On, o.faPrefillProbe);
  const char* scopeKnob = "FOUNDRY_FA_PREFILL_COOPMAT2_SCOPE";
  const std::string scopeValue = coopMat2ScopeName(o.faPrefillCoopMat2Subgroup);
  if (o.faPrefillCoopMat2Subgroup && o.faPrefillCoopMat2 == Force::Off) {
    throw UserError(o.fieldOf(scopeKnob), fmt::format("{} cannot be used here: FOUNDRY_FA_PREFILL_COOPMAT2 is 0, so no "
                                                      "coopmat2 matrices are used; accepted here: auto",
                                                      scopeValue));
  }
  const bool askedCoop2 = o.faPrefillCoopMat2 == Force::On || o.faPrefillCoopMat2Subgroup.has_value();
  if (askedCoop2 && !noCoop2.empty()) {
    const bool byScope = o.faPrefillCoopMat2 != Force::On;
    throw UserError(o.fieldOf(byScope ? scopeKnob : "FOUNDRY_FA_PREFILL_COOPMAT2"),
                    fmt::format("{} cannot be used here: {}; accepted here: auto{}", byScope ? scopeValue : "1",
                                noCoop2, byScope ? "" : ", 0"));
  }
  const std::uint64_t coop2Tiles = queryTiles(16 * tune.coop2Warps);
  const bool coop2Fills = coop2Tiles >= std::uint64_t(tune.coop2Groups) * device.computeUnits;
  v.coopMat2 = noCoop2.empty() && (askedCoop2 || (v.coopMat && bf16Call) ||
                                    (o.faPrefillCoopMat2 == Force::Auto && tune.coop2 != 0 && coop2Fills));
  v.coopMat2Subgroup = v.coopMat2 && o.faPrefillCoopMat2Subgroup.value_or(tune.coop2Subgroup != 0);
  if (v.coopMat) {
    why.push_back({"matrices",
                   !v.coopMat2          ? "GL_NV_cooperative_matrix, subgroup scope"
                   : v.coopMat2Subgroup ? "coopmat2, subgroup scope (each subgroup's rows, flexible dimensions)"
                                        : "coopmat2, workgroup scope",
                   askedCoop2 ? std::string(o.faPrefillCoopMat2 == Force::On ? "FOUNDRY_FA_PREFILL_COOPMAT2"
                                                                             : scopeKnob)
                   : o.faPrefillCoopMat2 != Force::Auto ? std::string("FOUNDRY_FA_PREFILL_COOPMAT2")
                   : !noCoop2.empty()                   ? noCoop2
                   : bf16Call                           ? std::string("bf16 operands exist only in coopmat2 matrices")
                   : tune.coop2 != 0 && !coop2Fills
                       ? fmt::format("{} query tiles of {} rows are fewer than {} per compute unit; {}",
                                     coop2Tiles, 16 * tune.coop2Warps, tune.coop2Groups,
                                     tune.sourceOf("coop2Groups"))
                       : std::string(tune.sourceOf("coop2"))});
  }
  if (v.coopMat2) {
    v.rowsPerWarp = 16;
    v.warps = o.faPrefillWarps.value_or(tune.coop2Warps);
    v.keysPerTile = tune.coop2KeysPerTile;
  } else if (v.coopMat) {
    v.rowsPerWarp = 16;
    v.quadSoftmax = device.coopMatLayout.quad() && o.faPrefillRegisterSoftmax != Force::Off;
    v.warps = o.faPrefillWarps.value_or(v.quadSoftmax ? tune.coopWarps : tune.coopWarpsShared);
    if (o.faPrefillRegisterSoftmax == Force::On && !device.coopMatLayout.quad()) {
      throw UserError(o.fieldOf("FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX"),
                      fmt::format("1 cannot be used here: device '{}' did not show the quad accumulator layout; "
                                  "accepted on this device: auto, 0", device.name));
    }
    v.keysPerTile = v.quadSoftmax ? tune.coopKeysPerTile : tune.coopKeysPerTileShared;
    v.loader = o.faPrefillLoader == Force::On;
    if (v.loader && !v.quadSoftmax) {
      throw UserError(o.fieldOf("FOUNDRY_FA_PREFILL_LOADER"),
                      "1 cannot be used here: a loader subgroup needs the softmax in registers; accepted here: auto, 0");
    }
    if (v.loader) why.push_back({"loader", "one subgroup loads K/V for the others", "FOUNDRY_FA_PREFILL_LOADER"});
    why.push_back({"softmax", v.quadSoftmax ? "registers" : "shared memory",
                   o.faPrefillRegisterSoftmax != Force::Auto ? "FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX"
                 : v.quadSoftmax ? "the accumulator layout is the quad pattern (probed)"
                                 : "the accumulator layout is unknown: rows go through shared memory"});
  } else {
    if (o.faPrefillLoader == Force::On) {
      throw UserError(o.fieldOf("FOUNDRY_FA_PREFILL_LOADER"),
                      "1 cannot be used here: a loader subgroup is part of the cooperative-matrix prefill, not the "
                      "subgroup variant this call takes; accepted here: auto, 0");
    }
    v.warps = o.faPrefillWarps.value_or(tune.prefillWarps);
    v.rowsPerWarp = tune.prefillRowsPerWarp;
    // A tile as wide as the subgroup at least: one key per lane in the scores.
    v.keysPerTile = std::max<std::uint32_t>(sg, tune.prefillKeysPerTile);
  }
  // Cooperative matrices (either scope), few query tiles: smaller ones fill the device where a Split-K
  // would otherwise be needed (its partials and their reduce cost more; H200 D128 S512: 33.1 us with 4
  // subgroups, 53.0 with 8 and 2 splits).
  if (v.coopMat && !o.faPrefillWarps) {
    const std::uint32_t planned = v.warps;
    while (v.warps > tune.coopMinWarps && queryTiles(16 * v.warps) < device.computeUnits) v.warps /= 2;
    if (v.warps != planned) {
      why.push_back({"query tile", fmt::format("{} subgroups instead of {}", v.warps, planned),
                     fmt::format("{} query tiles of {} rows would not fill {} compute units; {}",
                                 queryTiles(16 * planned), 16 * planned, device.computeUnits,
                                 tune.sourceOf("coopMinWarps"))});
    }
  }
  if (o.faPrefillKeysPerTile) v.keysPerTile = *o.faPrefillKeysPerTile;
  why.push_back({"warps", std::to_string(v.warps),
                 o.faPrefillWarps ? std::string("FOUNDRY_FA_PREFILL_WARPS")
                                  : tune.sourceOf(!v.coopMat     ? "prefillWarps"
                                                  : v.coopMat2   ? "coop2Warps"
                                                  : v.quadSoftmax ? "coopWarps"
                                                                  : "coopWarpsShared")});
  if (v.workgroupSize(sg) > device.maxWorkgroupInvocations) {
    rejectKnob(o, "FOUNDRY_FA_PREFILL_WARPS", v.warps, "too many invocations per workgroup",
               fmt::format("1..{}", device.maxWorkgroupInvocations / sg));
  }
  // The first tile, in order of preference, that is usable and fits in shared memory. Cooperative-
  // matrix tiles keep their width (more products per softmax) and give up double buffering first,
  // then narrow, then take fewer subgroups (a smaller query tile, fewer invocations to share the
  // loads); the subgroup variant narrows its tile first, then gives up double buffering, then rows,
  // and last takes tiles narrower than the subgroup (idle lanes in the scores, but wide f32 rows fit).
  std::vector<PrefillVariant> order;
  // Tile widths from the preferred one down by halves (a forced width is the only one); those below
  // `narrowest` (idle lanes in the subgroup variant's scores) come after every wider tile.
  const std::uint32_t narrowest = v.coopMat ? 16 : std::max<std::uint32_t>(16, sg);
  const std::uint32_t narrowestAtAll = v.coopMat ? 16 : 4;
  std::vector<std::uint32_t> widths, narrower;
  for (std::uint32_t w = v.keysPerTile; w >= (o.faPrefillKeysPerTile ? v.keysPerTile : narrowestAtAll); w /= 2) {
    (w >= narrowest || o.faPrefillKeysPerTile ? widths : narrower).push_back(w);
  }
  const bool oneStageFirst =
      v.coopMat2 ? tune.coop2Stages == 1
      : v.coopMat
          ? tune.coopStages == 1 &&
                queryTiles(v.rowsPerWorkgroup()) >= std::uint64_t(tune.coopOneStageGroups) * device.computeUnits
          : tune.prefillStages == 1;
  // Workgroup-scope tiles may skip staging (0) where the cache is f16 or bf16 and not paged.
  const bool unstaged = v.coopMat2 && tune.coop2Stages == 0 && v.tilesAsStored() && p.pageSize == 0;
  const std::vector<std::uint32_t> stageCounts = o.faPrefillStages ? std::vector<std::uint32_t>{*o.faPrefillStages}
                                                 : unstaged        ? std::vector<std::uint32_t>{0u, 2u, 1u}
                                                 : v.loader        ? std::vector<std::uint32_t>{2u}
                                                 : oneStageFirst   ? std::vector<std::uint32_t>{1u, 2u}
                                                                   : std::vector<std::uint32_t>{2u, 1u};
  if (v.coopMat) {
    for (std::uint32_t w = v.warps; w >= 1; w /= 2) {
      for (std::uint32_t kpt : widths) {
        for (std::uint32_t st : stageCounts) {
          PrefillVariant c = v;
          c.warps = w, c.keysPerTile = kpt, c.stages = st;
          order.push_back(c);
        }
      }
      if (o.faPrefillWarps) break;
    }
  } else {
    auto add = [&](std::uint32_t rows, std::uint32_t st, std::uint32_t kpt) {
      PrefillVariant c = v;
      c.rowsPerWarp = rows, c.keysPerTile = kpt, c.stages = st;
      order.push_back(c);
    };
    for (std::uint32_t rows = v.rowsPerWarp; rows >= 1; rows /= 2) {
      for (std::uint32_t st : stageCounts) {
        for (std::uint32_t kpt : widths) add(rows, st, kpt);
      }
    }
    // Below the subgroup's width the share of idle lanes matters most: the widest such tile first.
    for (std::uint32_t kpt : narrower) {
      for (std::uint32_t st : stageCounts) {
        for (std::uint32_t rows = v.rowsPerWarp; rows >= 1; rows /= 2) add(rows, st, kpt);
      }
    }
  }
  // Workgroup-scope matrices: the driver keeps some shared memory, and caps the workgroup.
  const bool workgroupScope = v.coopMat2 && !v.coopMat2Subgroup;
  const std::uint32_t sharedLimit =
      workgroupScope
          ? device.maxSharedMemoryBytes - std::min(device.maxSharedMemoryBytes, device.coopMat2ReservedShared)
          : device.maxSharedMemoryBytes;
  const auto fits = std::find_if(order.begin(), order.end(), [&](const PrefillVariant& c) {
    return c.sharedBytes(sg) <= sharedLimit && c.unusableReason(sg).empty() &&
           (!workgroupScope || device.coopMat2MaxWorkgroup == 0 || c.workgroupSize(sg) <= device.coopMat2MaxWorkgroup);
  });
  if (fits == order.end()) {
    v = order.back();
    const std::string unusable = v.unusableReason(sg);
    const std::string detail = !unusable.empty() ? unusable
                                              : fmt::format("the smallest tile, {}x{} keys in {} stage, needs {} bytes",
                                                            v.rowsPerWorkgroup(), v.keysPerTile, v.stages,
                                                            v.sharedBytes(sg));
    if (o.faPrefillLoader == Force::On) {
      throw UserError(o.fieldOf("FOUNDRY_FA_PREFILL_LOADER"),
                      fmt::format("1 cannot be used here: no tile with a loader subgroup fits device '{}': {}; "
                                  "accepted here: auto, 0", device.name, detail));
    }
    if (o.faPrefillStages) {
      rejectKnob(o, "FOUNDRY_FA_PREFILL_STAGES", v.stages, detail,
                 fmt::format("auto, or 1 or 2 staging buffers that fit in {} bytes of shared memory",
                             device.maxSharedMemoryBytes));
    }
    if (o.faPrefillKeysPerTile) {
      rejectKnob(o, "FOUNDRY_FA_PREFILL_KEYS_PER_TILE", v.keysPerTile, detail,
                 fmt::format("auto, or a power of two from {} whose tiles fit in {} bytes of shared memory", narrowestAtAll,
                             device.maxSharedMemoryBytes));
    }
    if (o.faPrefillWarps) {
      throw UserError(o.fieldOf("FOUNDRY_FA_PREFILL_WARPS"),
                      fmt::format("no prefill tile with {} warps fits device '{}' ({} bytes of shared memory): {}",
                                  v.warps, device.name, device.maxSharedMemoryBytes, detail));
    }
    // Not a knob's fault: this head_dim's K/V tiles need more shared memory than the device has.
    throw UnsupportedError(fmt::format("no prefill tile for head_dim {} with {} tiles fits device '{}' ({} bytes of "
                                       "shared memory): {}; SdpaReferenceStep handles this shape",
                                       p.headDim, v.tilesAreHalf() ? "f16" : "f32", device.name,
                                       device.maxSharedMemoryBytes, detail));
  }
  if (fits->warps != v.warps) {
    revise(why, "warps", std::to_string(fits->warps),
           fmt::format("fewer subgroups than {}: the query tile and the K/V loads must fit the staging for head_dim {}",
                       v.warps, p.headDim));
  }
  v = *fits;
  why.push_back({"tile", fmt::format("{}x{} keys, {} stage(s)", v.rowsPerWorkgroup(), v.keysPerTile, v.stages),
                 fmt::format("{}{}{} bytes of shared memory of {}",
                             o.faPrefillKeysPerTile ? "FOUNDRY_FA_PREFILL_KEYS_PER_TILE; " : "",
                             o.faPrefillStages ? "FOUNDRY_FA_PREFILL_STAGES; " : "", v.sharedBytes(sg),
                             device.maxSharedMemoryBytes)});

  plan.tile = {v.rowsPerWorkgroup(), v.keysPerTile};
  return plan;
}

AttentionPlan fitPrefill(const AttentionPlan& variant, const AttentionProblem& p, const DeviceInfo& device,
                         const AttentionOptions& o) {
  AttentionPlan plan = variant;
  auto& v = plan.prefillVariant;
  auto& why = plan.decisions;
  const std::uint32_t sg = device.subgroupSize;
  const Tuning tune = tuningFor(device, p.headDim, p.dtype);
  const std::uint64_t kvKiB =
      storageBytes(p.dtype, std::uint64_t(p.nKvHeads) * p.kvLen * (p.headDim + p.vDim())) / 1024;
  v.headsFirst = o.faPrefillHeadsFirst == Force::Auto ? kvKiB <= tune.prefillHeadsFirstKiB
                                                      : o.faPrefillHeadsFirst == Force::On;
  why.push_back({"grid order", v.headsFirst ? "heads first" : "each head's tiles in turn",
                 o.faPrefillHeadsFirst != Force::Auto
                     ? std::string("FOUNDRY_FA_PREFILL_HEADS_FIRST")
                     : fmt::format("{} KiB of K/V per sequence {} {} KiB; {}", kvKiB, v.headsFirst ? "within" : "beyond",
                                   tune.prefillHeadsFirstKiB, tune.sourceOf("prefillHeadsFirstKiB"))});
  v.maskSplit = o.faPrefillMaskSplit == Force::Auto ? tune.prefillMaskSplit != 0 : o.faPrefillMaskSplit == Force::On;
  why.push_back({"tile masks", v.maskSplit ? "a mask-free copy of the tile code" : "one copy, masks under a flag",
                 o.faPrefillMaskSplit != Force::Auto ? std::string("FOUNDRY_FA_PREFILL_MASK_SPLIT")
                                                     : tune.sourceOf("prefillMaskSplit")});
  const std::uint32_t qTiles = ceilDiv(p.qLen, v.rowsPerWorkgroup());
  const std::uint32_t base = qTiles * p.nHeads * p.batch;
  const std::uint32_t keys = plan.visibleKeys = Selector::visibleKeys(p, v.rowsPerWorkgroup(), v.keysPerTile);
  std::uint32_t wanted = 1;
  std::string reason;
  if (o.disableFaPrefillSplitK) {
    reason = "FOUNDRY_DISABLE_FA_PREFILL_SPLITK=1";
  } else if (o.faPrefillSplitK) {
    wanted = *o.faPrefillSplitK;
    reason = "FOUNDRY_FA_PREFILL_SPLIT_K";
  } else if (base < device.computeUnits) {
    // Few query tiles: split the keys so the device fills, keeping a few tiles per split.
    wanted = std::max<std::uint32_t>(
        1, std::min(ceilDiv(2ull * device.computeUnits, base), keys / (tune.prefillSplitTiles * v.keysPerTile)));
    reason = fmt::format("{} workgroups for {} compute units{}", base, device.computeUnits,
                         keys < p.kvLen ? fmt::format("; over the {} keys a query tile can see", keys) : "");
  } else {
    reason = fmt::format("{} workgroups already fill {} compute units", base, device.computeUnits);
  }
  const std::uint32_t most = Selector::mostKeysPerWorkgroup(plan, device, Selector::hookLoopPassesPerKey(plan, p));
  splitsWithinLoopLimit(keys, most, wanted, reason,
                        o.disableFaPrefillSplitK ? "FOUNDRY_DISABLE_FA_PREFILL_SPLITK"
                        : o.faPrefillSplitK      ? "FOUNDRY_FA_PREFILL_SPLIT_K"
                                                 : nullptr,
                        o.disableFaPrefillSplitK ? std::optional<std::uint32_t>(1) : o.faPrefillSplitK, device, o);
  wanted = capSplitsToScratch(p, device, wanted);
  Selector::splitKeys(keys, wanted, v.keysPerTile, plan.splits, plan.kvChunk);
  requireWithinLoopLimit(plan, most, device);
  v.split = plan.splits > 1;
  v.lse = p.lse && !v.split;
  why.push_back({"split-k", std::to_string(plan.splits),
                 reason + forcedSplitsNote(o.faPrefillSplitK, plan.splits, keys, v.keysPerTile)});
  v.probe = o.faPrefillProbe;
  if (v.probe) why.push_back({"probe", "on", "FOUNDRY_FA_PREFILL_PROBE: a measuring build of the kernel"});
  plan.grid = v.headsFirst ? Grid{p.nHeads, qTiles * plan.splits, p.batch} : Grid{qTiles * plan.splits, p.nHeads, p.batch};
  plan.reduceWorkgroup = std::max<std::uint32_t>(64, sg);
  plan.reduceGrid = {p.qLen, p.nHeads, p.batch};
  plan.scratchBytes = v.split ? partialBytes(p, plan.splits) : 0;
  return plan;
}

}  // namespace

std::uint32_t AttentionPlan::probeSubgroups() const {
  return decode ? decodeVariant.warps : prefillVariant.subgroups();
}

std::string AttentionPlan::describe() const {
  std::string s;
  for (const auto& d : decisions) s += fmt::format("{}{} = {} ({})", s.empty() ? "" : "; ", d.what, d.value, d.reason);
  return s;
}

std::string Selector::groupRowsRefusal(const AttentionProblem& p, bool fusedRope) {
  if (p.qLen != 1) return fmt::format("the call has q_len {}, not a decode call's 1", p.qLen);
  if (p.group() < 2) return fmt::format("the GQA group has {} query head: no rows to share a K/V read", p.group());
  if (fusedRope) return "RoPE is fused into the decode kernel, which the prefill kernels do not take";
  if (!p.plainValues()) return fmt::format("V rows (value_dim {}) are not like K's (head_dim {})", p.vDim(), p.headDim);
  // A modifier may tell the group's rows apart (a head's ALiBi slope or sink) or place them (a window
  // from the query's position); the rows here are heads at one position.
  const Modifiers mods = p.activeModifiers();
  if (!mods.empty()) {
    std::vector<std::string> names;
    for (const auto& m : mods) names.push_back(m->name());
    return fmt::format("the call has modifiers ({}), which would see the group's heads as positions",
                       fmt::join(names, ", "));
  }
  return {};
}

bool Selector::decodeAsGroupRows(const AttentionProblem& p, bool fusedRope, const DeviceInfo& device,
                                 const AttentionOptions& o) {
  if (o.faDecodeGroupRows == Force::Off) return false;
  const std::string refusal = groupRowsRefusal(p, fusedRope);
  if (o.faDecodeGroupRows == Force::On) {
    if (!refusal.empty() && p.qLen == 1) rejectKnob(o, "FOUNDRY_FA_DECODE_GROUP_ROWS", 1, refusal, "auto, 0");
    return refusal.empty();
  }
  return refusal.empty() && device.hasCoopMat({16, 16, 16, DType::F16, DType::F32}) &&
         tuningFor(device, p.headDim, p.dtype).decodeGroupRows != 0;
}

AttentionProblem Selector::groupRowsProblem(const AttentionProblem& p) {
  AttentionProblem g = p;
  g.nHeads = p.nKvHeads;
  g.qLen = p.group();
  g.causal = false;
  g.qLayout = g.oLayout = Layout::HeadMajor;
  return g;
}

std::uint32_t Selector::decodeHeadsPerWorkgroup(std::uint32_t group) {
  for (std::uint32_t h = std::min<std::uint32_t>(group, 8); h > 1; --h) {
    if (group % h == 0) return h;
  }
  return 1;
}

std::uint32_t Selector::visibleKeys(const AttentionProblem& p, std::uint32_t rows, std::uint32_t align) {
  const Modifiers mods = p.activeModifiers();
  const ModifierChain chain{mods};
  const std::uint32_t heads = chain.rangeDependsOnHead() ? p.nHeads : 1;
  std::uint32_t widest = 0;
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    const std::uint32_t n = chain.kvLength(b, p.kvLen), offset = n - p.qLen;
    for (std::uint32_t i0 = 0; i0 < p.qLen; i0 += rows) {
      const std::uint32_t qLo = offset + i0, qHi = offset + std::min(i0 + rows, p.qLen) - 1;
      // A decode workgroup serves several heads: a head-dependent range counts as their union.
      std::uint32_t lo = KeyRange::kEnd, hi = 0;
      for (std::uint32_t h = 0; h < heads; ++h) {
        const KeyRange r = chain.keyRange({b, h, qLo, qHi, offset}).within(n);
        if (r.anyHi > r.anyLo) lo = std::min(lo, r.anyLo), hi = std::max(hi, r.anyHi);
      }
      const std::uint32_t first = lo / align * align;
      widest = std::max(widest, hi > first ? hi - first : 0u);
    }
  }
  return std::max<std::uint32_t>(widest, 1);
}

std::uint64_t Selector::hookLoopPassesPerKey(const AttentionPlan& plan, const AttentionProblem& problem) {
  const ModifierCall call = problem.modifierCall();
  std::uint64_t perCall = 0;
  for (const ModifierPtr& m : problem.activeModifiers()) perCall += m->loopPassesPerCall(call);
  const std::uint64_t rows = plan.decode ? plan.decodeVariant.heads : plan.prefillVariant.rowsPerWarp;
  return perCall * 3 * rows;
}

std::uint32_t Selector::mostKeysPerWorkgroup(const AttentionPlan& plan, const DeviceInfo& device,
                                             std::uint64_t hookPassesPerKey) {
  if (device.loopLimit == 0) return 0;
  const std::uint32_t sg = device.subgroupSize;
  const std::uint32_t granule = plan.decode ? plan.decodeVariant.keyGranule(sg) : plan.prefillVariant.keysPerTile;
  const auto passes = [&](std::uint32_t keys) {
    const std::uint64_t hooks = (std::uint64_t(keys) + granule) * hookPassesPerKey;
    return hooks + (plan.decode ? plan.decodeVariant.loopPasses(keys, sg) : plan.prefillVariant.loopPasses(keys, sg));
  };
  const std::uint64_t budget = device.loopPassBudget();
  std::uint64_t lo = 0, hi = 0xffffffffull / granule;
  while (lo < hi) {
    const std::uint64_t mid = (lo + hi + 1) / 2;
    if (passes(static_cast<std::uint32_t>(mid * granule)) <= budget) lo = mid; else hi = mid - 1;
  }
  if (lo == 0) {
    throw UnsupportedError(fmt::format("device '{}' ends a shader invocation's loops after {} passes; this kernel "
                                       "spends more than that on {} keys", device.name, device.loopLimit, granule));
  }
  return static_cast<std::uint32_t>(lo * granule);
}

void Selector::splitKeys(std::uint32_t kvLen, std::uint32_t wanted, std::uint32_t granule, std::uint32_t& splits,
                         std::uint32_t& chunk) {
  wanted = std::max<std::uint32_t>(1, std::min(wanted, kvLen));
  chunk = ceilDiv(ceilDiv(kvLen, wanted), granule) * granule;
  splits = ceilDiv(kvLen, chunk);  // recomputed: the last split is never empty
}

AttentionPlan Selector::plan(const AttentionProblem& problem, const DeviceInfo& device, const AttentionOptions& options) {
  options.validate();
  return fit(variant(problem, device, options), problem, device, options);
}

AttentionPlan Selector::variant(const AttentionProblem& problem, const DeviceInfo& device,
                                const AttentionOptions& options) {
  return problem.decode() ? decodeChoices(problem, device, options) : prefillChoices(problem, device, options);
}

AttentionPlan Selector::fit(const AttentionPlan& variant, const AttentionProblem& problem, const DeviceInfo& device,
                            const AttentionOptions& options) {
  FOUNDRY_CHECK_INTERNAL(variant.decode == problem.decode(), "a {} plan fitted to a {} call",
                         variant.decode ? "decode" : "prefill", problem.decode() ? "decode" : "prefill");
  return problem.decode() ? fitDecode(variant, problem, device, options) : fitPrefill(variant, problem, device, options);
}

}  // namespace foundry
