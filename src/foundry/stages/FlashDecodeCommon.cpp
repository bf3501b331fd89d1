#include "foundry/stages/FlashDecodeCommon.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/HeadLayoutStage.h"
#include "foundry/stages/LseOutput.h"
#include "foundry/stages/PrefillProbe.h"
#include "foundry/stages/QuadLayout.h"

namespace foundry::decode_detail {

std::set<std::string> hookPoints(const DecodeVariant& v) {
  auto points = attentionHookNames(v.split && !v.fusedReduce ? HookPhase::Keys : HookPhase::All);
  points.erase(hook::kTileVisible);  // keys stream one step at a time: no tiles to skip
  return points;
}

void declareBody(const DecodeVariant& v, KernelInterface& k, const DeviceInfo& device) {
  const std::string reason = v.unusableReason(device.subgroupSize);
  FOUNDRY_CHECK_INTERNAL(reason.empty(), "decode variant {}: {}", v.key(), reason);
  k.usesBuffer("k_cache").usesBuffer("v_cache");
  FOUNDRY_CHECK_INTERNAL(!v.claims || (v.fusedReduce && !v.scalar),
                         "decode variant {}: claims need a merging workgroup, and a kernel that takes them", v.key());
  if (v.split) {
    // Merged in place, the partials are read back by another workgroup of the same dispatch.
    const Access partials = v.fusedReduce ? Access::Coherent : Access::WriteOnly;
    k.buffer("partial_o", DType::F32, partials);
    k.buffer("partial_ml", DType::F32, partials, "vec2");
    k.push("n_splits", PushType::U32);
  }
  const bool writesOutput = !v.split || v.fusedReduce;
  if (writesOutput) k.buffer("o", v.oType(), Access::WriteOnly);
  FOUNDRY_CHECK_INTERNAL(!v.lse || writesOutput, "decode variant {} writes an LSE but no output", v.key());
  if (v.lse) lse_detail::declare(k);
  probe::declare(k, device, v.probe, "FOUNDRY_FA_DECODE_PROBE");
  if (v.probe) k.snippet("flashattention/probe.glsl");
  if (v.split && v.fusedReduce) {
    k.buffer("split_arrivals", DType::F32, Access::ReadWrite, "uint");  // one counter per head group
    k.shared("merge_here", "uint", 1, 4);
    if (v.batchedMerge) {
      const std::uint32_t elems = v.heads * v.vDim();
      k.define("SPLITK_ELEMS", fmt::format("{}u", elems));
      // Some invocations have one element fewer than others (D80 and D96 on 256 invocations).
      k.define("SPLITK_RAGGED", elems % v.workgroupSize(device.subgroupSize) != 0 ? "1" : "0");
      k.constant("SPLITK_FEW", DecodeVariant::kMergeBatchFew).constant("SPLITK_BATCH", DecodeVariant::kMergeBatch);
    }
    k.snippet("flashattention/splitk_reduce.glsl");
  }
  k.push("qk_scale", PushType::F32).push("kv_chunk", PushType::U32);
  for (const char* s : {"batch", "q_head0", "kv_head", "o_base"}) k.consumes(s, "uint");
  HeadLayoutStage::usesShapeFields(k);
  // A Split-K part leaves the output's hooks to whoever merges its partials.
  hostAttentionHooks(k, hookPoints(v));

  const std::uint32_t parts = v.scalar ? 1 : v.warps;
  HeadLayoutStage::declareRows(k, v.headDim, v.vDim());
  k.constant("DECODE_HEADS", v.heads).constant("DECODE_PARTS", parts);
  const bool halfPartial = v.partial == PartialStorage::Half;
  k.define("PART_T", halfPartial ? "float16_t" : "float");
  k.define("PART_CLAMP(x)", halfPartial ? "clamp_to_half(x)" : "(x)");
  // The tensor-core kernel's partials lie over its staging rows (decode_coopmat.glsl: dc_part_read).
  if (!v.tensorCores) {
    k.shared("part_o", halfPartial ? "float16_t" : "float", parts * v.heads * v.vDim(), halfPartial ? 2 : 4);
    k.define("PART_O_READ(i)", "float(part_o[i])");
  }
  k.shared("part_m", "float", parts * v.heads, 4).shared("part_l", "float", parts * v.heads, 4);
  if (writesOutput) glsl::declareWrite(k, "OUT_STORE", v.oType());
  if (v.scalar) {
    k.shared("block_s", "float", v.heads * v.workgroupSize(device.subgroupSize), 4);
    k.shared("block_m", "float", v.heads, 4).shared("block_l", "float", v.heads, 4).shared("block_alpha", "float", v.heads, 4);
    k.snippet("flashattention/decode_scalar.glsl");
  } else if (v.tensorCores) {
    // 16-key tiles through each subgroup's own staging rows, the softmax on the quad layout.
    k.constant("DECODE_WARPS", v.warps).constant("DC_RING", v.unroll).define("DC_INT8", v.dtype == DType::I8 ? "1" : "0");
    k.define("DC_BF16", v.dtype == DType::BF16 && !v.bf16Operands ? "1" : "0");
    k.define("DC_BF16_OPS", v.bf16Operands ? "1" : "0");
    k.constant("DC_ROW4K", v.tensorRow4K()).constant("DC_ROW4V", v.tensorRow4V());
    k.constant("DC_PAIR", v.tensorTilesAtOnce());
    k.define("DC_VHALVES", v.valueHalves ? "1" : "0").define("DC_VREGS", v.valueRegisters ? "1" : "0");
    k.define("DC_CLAIMS", v.claims ? "1" : "0");
    if (v.claims) k.snippet("flashattention/claims.glsl");
    k.constant("DC_ROWS4", v.tensorRowsBytes() / 16).constant("DC_STAGE4", v.tensorStageBytes() / 16);
    k.define("PART_O_READ(i)", "dc_part_read(i)");
    k.shared("dc_tile", "uvec4", v.warps * v.tensorStageBytes() / 16, 16);
    declareQuadLayout(k, device.coopMatLayout8, "CM8");
    if (v.valueRegisters) declareQuadLayout(k, device.coopMatLayoutF16, "CMH");
    k.extension("GL_KHR_memory_scope_semantics");
    // bf16 operands are GL_KHR_cooperative_matrix types, which only the external glslc compiles.
    if (v.bf16Operands) k.extension("GL_KHR_cooperative_matrix").extension("GL_EXT_bfloat16");
    else k.extension("GL_NV_cooperative_matrix");
    k.extension("GL_EXT_shader_explicit_arithmetic_types_float16");
    if (v.dtype == DType::I8) {
      k.extension("GL_NV_integer_cooperative_matrix").extension("GL_EXT_shader_explicit_arithmetic_types_int8");
    }
    k.extension("GL_KHR_shader_subgroup_basic").extension("GL_KHR_shader_subgroup_shuffle");
    k.extension("GL_KHR_shader_subgroup_arithmetic").extension("GL_KHR_shader_subgroup_vote");
    if (v.dtype == DType::I8) k.snippet("common/int8_half.glsl");
    k.snippet("flashattention/decode_coopmat.glsl");
  } else {
    k.constant("DECODE_WARPS", v.warps).constant("DECODE_KEYS_PER_WARP", v.keysPerWarp).constant("DECODE_UNROLL", v.unroll);
    k.constant("DECODE_LANES_PER_KEY", v.lanesPerKey(device.subgroupSize));
    k.constant("DECODE_ELEMS", v.elemsPerLane(device.subgroupSize));
    k.constant("DECODE_ELEMS_V", v.valueElemsPerLane(device.subgroupSize));
    // Arithmetic runs on vec4 at most; an 8-wide load holds two such chunks. Tail words are chunks of
    // their own, so every chunk is a word then.
    const std::uint32_t arith = v.tailWords ? 2 : std::min<std::uint32_t>(v.vecWidth, 4);
    k.define("DECODE_VEC", std::to_string(arith)).define("DECODE_PAIR", std::to_string(v.vecWidth / arith));
    k.define("DECODE_Q_SHARED", v.queryShared ? "1" : "0");
    k.define("DECODE_IDLE_LANES", v.idleLanes ? "1" : "0");
    k.define("DECODE_TAIL_WORDS", v.tailWords ? "1" : "0");
    k.define("DECODE_SCATTER", v.scatter ? "1" : "0");
    k.define("DECODE_STEP_SCALES", v.stepScales ? "1" : "0");
    k.define("DECODE_HALF_PRODUCTS", v.halfProducts ? "1" : "0");
    if (v.halfProducts) {
      k.extension("GL_EXT_shader_explicit_arithmetic_types_float16").snippet("common/int8_half.glsl");
    }
    if (v.scatter) k.constant("DECODE_SC_ROUNDS", std::countr_zero(v.lanesPerKey(device.subgroupSize)));
    k.define("DECODE_INT8_DOT", v.int8Dot ? "1" : "0");
    if (v.int8Dot) k.extension("GL_EXT_spirv_intrinsics").snippet("common/int8_dot.glsl");
    k.define("DECODE_LAZY_RESCALE", v.lazyRescale ? "1" : "0");
    k.define("DECODE_CLAIMS", v.claims ? "1" : "0");
    if (v.claims) k.snippet("flashattention/claims.glsl");
    k.extension("GL_KHR_shader_subgroup_basic").extension("GL_KHR_shader_subgroup_shuffle");
    if (v.lazyRescale) k.extension("GL_KHR_shader_subgroup_vote");
    k.snippet("flashattention/decode_subgroup.glsl");
  }
  k.snippet("flashattention/decode_combine.glsl");
  // Loops over register arrays are unrolled so every index is a constant (no local-memory arrays).
  k.extension("GL_EXT_control_flow_attributes");
}

namespace {

// Every invocation's partial writes are made visible device-wide before its workgroup's arrival is
// counted; the workgroup that arrives last merges all the splits of its head group, then leaves
// the counter at zero for the next call. One dispatch instead of part, barrier and reduce.
void emitLastArrivalMerge(const DecodeVariant& v, GlslWriter& w) {
  w.line("memoryBarrierBuffer();");
  w.line("barrier();");
  w.line("const uint group = batch * gl_NumWorkGroups.y + gl_WorkGroupID.y;");
  w.open("if (gl_LocalInvocationIndex == 0u)");
  w.line("merge_here[0] = atomicAdd(split_arrivals[group], 1u) == pc.n_splits - 1u ? 1u : 0u;");
  w.close();
  w.line("barrier();");
  if (v.probe) w.line("probe_stamp(PROBE_HANDED_OVER);");
  w.open("if (merge_here[0] != 0u)");
  w.line("memoryBarrierBuffer();");
  const auto store = [&](const char* r) {
    w.line("o[o_base + h * pc.o_stride_h + d] = OUT_STORE(fa_output(o_merged{0}, m_merged{0}, l_merged{0}, batch, "
           "q_head0 + h, q_pos, d));", r);
    if (v.lse) {
      w.line("if (d == 0u) {}", lse_detail::storeRow("batch", "q_head0 + h", "0u", fmt::format("m_merged{}", r),
                                                     fmt::format("l_merged{}", r)));
    }
  };
  if (v.batchedMerge) {
    w.line("float o_merged[SPLITK_PER_INVOCATION], m_merged[SPLITK_PER_INVOCATION], l_merged[SPLITK_PER_INVOCATION];");
    w.line("splitk_merge_batched((batch * pc.n_heads + q_head0) * pc.n_splits, pc.n_splits, o_merged, m_merged, "
           "l_merged);");
    w.open("[[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r)");
    w.line("const uint i = splitk_index(r), h = i / VALUE_DIM, d = i % VALUE_DIM;");
    w.open("if (i < SPLITK_ELEMS)");
    store("[r]");
    w.close();
  } else {
    w.open("for (uint i = gl_LocalInvocationIndex; i < DECODE_HEADS * VALUE_DIM; i += WORKGROUP_SIZE)");
    w.line("const uint h = i / VALUE_DIM, d = i % VALUE_DIM;");
    w.line("const uint row0 = (batch * pc.n_heads + q_head0 + h) * pc.n_splits;");
    w.line("float o_merged, m_merged, l_merged;");
    w.line("splitk_merge(row0, pc.n_splits, d, o_merged, m_merged, l_merged);");
    store("");
  }
  w.close();
  w.line("if (gl_LocalInvocationIndex == 0u) split_arrivals[group] = 0u;");
  if (v.claims) {
    w.line("if (gl_LocalInvocationIndex == 0u) split_arrivals[claim_counter(batch)] = 0u;");
  }
  w.close();
}

}  // namespace

void emitBody(const DecodeVariant& v, GlslWriter& w) {
  // Split s takes the s-th chunk of the keys the workgroup's heads can see at all.
  w.line("const uint q_pos = fa_query_pos(batch, 0u);");
  w.line("const uvec4 keys = fa_keys_heads(batch, q_head0, DECODE_HEADS, q_pos, q_pos);");
  w.line("const uint kv_begin = min(keys.x + gl_WorkGroupID.x * pc.kv_chunk, keys.y);");
  w.line("const uint kv_end = min(kv_begin + pc.kv_chunk, keys.y);");
  if (v.probe) w.line("probe_stamp(PROBE_STREAM_BEGUN);");
  if (v.scalar) {
    w.line("flash_decode_scalar(kv_begin, kv_end, kv_head, pc.qk_scale, batch, q_head0, q_pos, keys);");
  } else {
    // The keys past every split's own chunk are the head group's claimed end (none without claims).
    w.line("const uint claim_begin = {};", v.claims ? "min(keys.x + pc.n_splits * pc.kv_chunk, keys.y)" : "kv_end");
    w.line("{}(kv_begin, kv_end, claim_begin, {}, kv_head, pc.qk_scale, batch, q_head0, q_pos, keys);",
           v.tensorCores ? "flash_decode_coopmat" : "flash_decode_subgroup", v.claims ? "keys.y" : "kv_end");
  }
  if (v.probe) w.line("probe_stamp(PROBE_STREAM_DONE);");
  w.line("barrier();");
  w.open("for (uint i = gl_LocalInvocationIndex; i < DECODE_HEADS * VALUE_DIM; i += WORKGROUP_SIZE)");
  w.line("const uint h = i / VALUE_DIM, d = i % VALUE_DIM;");
  w.line("float o_unnorm, m_all, l_all;");
  w.line("decode_combine(h, d, o_unnorm, m_all, l_all);");
  if (v.split) {
    w.line("const uint row = (batch * pc.n_heads + q_head0 + h) * pc.n_splits + gl_WorkGroupID.x;");
    w.line("partial_o[row * VALUE_DIM + d] = o_unnorm;");
    w.line("if (d == 0u) partial_ml[row] = vec2(m_all, l_all);");
  } else {
    w.line("o[o_base + h * pc.o_stride_h + d] = OUT_STORE(fa_output(o_unnorm, m_all, l_all, batch, q_head0 + h, "
           "q_pos, d));");
    if (v.lse) w.line("if (d == 0u) {}", lse_detail::storeRow("batch", "q_head0 + h", "0u", "m_all", "l_all"));
  }
  w.close();
  const bool fused = v.split && v.fusedReduce;
  if (v.probe && !fused) w.line("probe_stamp(PROBE_HANDED_OVER);");  // the output or the partials written
  if (fused) emitLastArrivalMerge(v, w);
  if (v.probe) w.line("probe_end_stamps({});", fused ? "merge_here[0] != 0u" : "false");
}

}  // namespace foundry::decode_detail
