#include "foundry/stages/SdpaPrefillCommon.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/FlashDecodeCommon.h"
#include "foundry/stages/HeadLayoutStage.h"
#include "foundry/stages/LseOutput.h"
#include "foundry/stages/PrefillProbe.h"
#include "foundry/stages/QuadLayout.h"

namespace foundry::prefill_detail {

namespace {

void declareSubgroup(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device) {
  const std::uint32_t sg = device.subgroupSize;
  const std::uint32_t row = v.headDim + v.padElements();
  const std::string tile = v.tilesAreHalf() ? "float16_t" : "float";
  const std::uint32_t esize = v.tileBytes();
  k.define("TILE_T", tile).define("PF_STAGES", std::to_string(v.stages)).define("PF_LOADER", "0");
  k.constant("PF_WARPS", v.warps).constant("PF_ROWS", v.rowsPerWarp).constant("PF_BR", v.rowsPerWorkgroup());
  k.constant("PF_BC", v.keysPerTile).constant("PF_KPL", v.keysPerLane(sg)).constant("PF_DPL", v.dimsPerLane(sg));
  k.constant("PF_PAD", v.padElements()).constant("PF_COPY_UNROLL", v.copyUnroll(sg));
  k.shared("q_tile", tile, v.rowsPerWorkgroup() * row, esize);
  k.shared("k_tile", tile, v.stages * v.keysPerTile * row, esize);
  k.shared("v_tile", tile, v.stages * v.keysPerTile * row, esize);
  k.shared("p_tile", "float", v.rowsPerWorkgroup() * v.keysPerTile, 4);
  k.extension("GL_KHR_shader_subgroup_basic").extension("GL_KHR_shader_subgroup_arithmetic");
  k.snippet("flashattention/prefill_subgroup.glsl").snippet("flashattention/prefill_loop.glsl");
}

void declareCoopMat(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device) {
  const std::uint32_t row4 = (v.headDim + 8) / 8;
  k.define("PF_STAGES", std::to_string(v.stages)).define("CM_QUAD", v.quadSoftmax ? "1" : "0");
  k.define("PF_LOADER", v.loader ? "1" : "0").constant("LD_CHUNK", PrefillVariant::kLoaderChunk);
  k.constant("PF_WARPS", v.warps).constant("PF_BR", v.rowsPerWorkgroup()).constant("PF_BC", v.keysPerTile);
  k.constant("CM_Q_PASS", v.queryRowsStaged());
  k.shared("kv_tile", "uvec4", 2 * v.stages * v.keysPerTile * row4, 16);
  if (v.quadSoftmax) {
    declareQuadLayout(k, device.coopMatLayout);  // the rows and columns each lane's accumulator elements hold
  } else {
    k.shared("s_tile", "uint", v.warps * 16 * v.keysPerTile, 4);
    k.shared("row_m", "float", v.warps * 16, 4).shared("row_alpha", "float", v.warps * 16, 4);
  }
  k.extension("GL_KHR_memory_scope_semantics").extension("GL_NV_cooperative_matrix");
  k.extension("GL_EXT_shader_explicit_arithmetic_types_float16");
  k.extension("GL_KHR_shader_subgroup_basic").extension("GL_KHR_shader_subgroup_shuffle");
  k.snippet("flashattention/prefill_coopmat.glsl").snippet("flashattention/prefill_loop.glsl");
}

// Workgroup-scope matrices: the staging area (K/V tiles, then the epilogue's O, m and l) is all the
// shared memory the kernel declares.
void declareCoopMat2(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device) {
  k.define("PF_STAGES", std::to_string(v.stages)).define("PF_LOADER", "0").constant("LD_CHUNK", PrefillVariant::kLoaderChunk);
  k.constant("PF_WARPS", v.warps).constant("PF_BR", v.rowsPerWorkgroup()).constant("PF_BC", v.keysPerTile);
  k.define("CM2_SUBGROUP", v.coopMat2Subgroup ? "1" : "0").constant("CM2_OUT_ROWS", v.coopMat2OutRows());
  k.shared("kv_tile", "uvec4", v.sharedBytes(device.subgroupSize) / 16, 16);
  k.extension("GL_KHR_memory_scope_semantics").extension("GL_KHR_cooperative_matrix");
  k.extension("GL_NV_cooperative_matrix2").extension("GL_EXT_shader_explicit_arithmetic_types_float16");
  // bf16 q, K and V are the products' operands as stored (VK_KHR_shader_bfloat16).
  const bool bf16 = v.dtype == DType::BF16;
  if (bf16) k.extension("GL_EXT_bfloat16");
  k.define("CM2_T", bf16 ? "bfloat16_t" : "float16_t");
  k.extension("GL_KHR_shader_subgroup_basic");
  if (v.coopMat2Subgroup) k.extension("GL_KHR_shader_subgroup_vote");  // the rescale's vote
  if (v.stages == 0) k.extension("GL_EXT_shader_explicit_arithmetic_types_int32");  // tensor layouts
  k.snippet("flashattention/prefill_coopmat2.glsl").snippet("flashattention/prefill_loop.glsl");
}

// `prow`: the Split-K partial row of the query row `row` of this tile, for this split.
void emitPartialRow(GlslWriter& w, const char* row) {
  w.line("const uint prow = ((batch * pc.n_heads + q_head0) * pc.q_len + q0 + {}) * pc.n_splits + split;", row);
}

// `value` is normalised already; the epilogue hooks see it with its row and dimension.
void emitStore(const PrefillVariant& v, GlslWriter& w, const char* value, const char* dim) {
  if (v.split) {
    w.line("partial_o[prow * HEAD_DIM + {}] = {};", dim, value);
  } else {
    w.line("o[o_base + (q0 + row) * pc.o_stride_s + {0}] = OUT_STORE(fa_epilogue({1}, batch, q_head0, pos0 + row, "
           "{0}));", dim, value);
  }
}

}  // namespace

std::set<std::string> hookPoints(const PrefillVariant& v) {
  return attentionHookNames(v.split ? HookPhase::Keys : HookPhase::All);
}

void declare(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device) {
  const std::string reason = v.unusableReason(device.subgroupSize);
  FOUNDRY_CHECK_INTERNAL(reason.empty(), "prefill variant {}: {}", v.key(), reason);
  // The cooperative-matrix variant moves f16 in 16-byte pieces.
  k.buffer("q", v.qType(), Access::ReadOnly, glsl::view(v.qType(), v.coopMat ? 8 : 1));
  if (!v.coopMat) {
    glsl::declareRead(k, "Q_READ", v.qType());
  }
  k.usesBuffer("k_cache").usesBuffer("v_cache");
  if (v.split) {
    k.buffer("partial_o", DType::F32, Access::WriteOnly).buffer("partial_ml", DType::F32, Access::WriteOnly, "vec2");
  } else {
    k.buffer("o", v.oType(), Access::WriteOnly);
    glsl::declareWrite(k, "OUT_STORE", v.oType());
    if (v.lse) lse_detail::declare(k);
  }
  FOUNDRY_CHECK_INTERNAL(!(v.lse && v.split), "prefill variant {}: a Split-K part writes no LSE", v.key());
  k.push("qk_scale", PushType::F32).push("kv_chunk", PushType::U32).push("n_splits", PushType::U32);
  for (const char* s : {"batch", "q_head0", "q_slot", "kv_head", "q_base", "o_base"}) k.consumes(s, "uint");
  k.constant("PF_SUBGROUPS", v.subgroups());
  k.constant("HEAD_DIM", v.headDim).constant("PF_LONGEST_FIRST", "bool", v.longestFirst ? "true" : "false");
  HeadLayoutStage::usesShapeFields(k);
  // A Split-K part leaves the output's hooks to the reduce kernel.
  hostAttentionHooks(k, hookPoints(v));
  // Loops over register arrays are unrolled so every index is a constant (no local-memory arrays).
  k.extension("GL_EXT_control_flow_attributes");
  probe::declare(k, device, v.probe);
  k.define("PF_MASK_SPLIT", v.maskSplit ? "1" : "0");  // prefill_loop.glsl's pf_tile_at
  if (v.coopMat2) declareCoopMat2(v, k, device);
  else if (v.coopMat) declareCoopMat(v, k, device);
  else declareSubgroup(v, k, device);
}

namespace {

// `begin` sets up the variant's state (pf_begin; the cooperative-matrix kernels stage Q in it too).
void emitTileLoop(GlslWriter& w, std::string_view begin = "pf_begin(st)") {
  w.line("PF_STATE st;");
  w.line("{};", begin);
  w.line("pf_tile_loop(st, kv_begin, kv_end, kv_head, batch, q_head0, pos0, pos_hi, keys, pc.qk_scale);");
}

// Both cooperative-matrix kernels: Q staged in shared memory, then the tile loop.
void emitCoopMatLoop(GlslWriter& w) { emitTileLoop(w, "pf_begin(st, q_base, q0, rows)"); }

// The workgroup-scope epilogue: O, m and l through the staging area, then one element per invocation.
void emitCoopMat2(const PrefillVariant& v, GlslWriter& w) {
  if (v.stages == 0) w.line("cm2_set_kv_rows(batch, kv_head);");
  emitCoopMatLoop(w);
  w.open("for (uint r0 = 0u; r0 < PF_BR; r0 += CM2_OUT_ROWS)");
  w.line("cm2_stage_out(st, r0);");
  w.open("for (uint i = gl_LocalInvocationIndex; i < CM2_OUT_ROWS * HEAD_DIM; i += WORKGROUP_SIZE)");
  w.line("const uint lr = i / HEAD_DIM, row = r0 + lr, d = i % HEAD_DIM;");
  w.line("if (row >= rows) break;");
  w.line("const float m = cm2_row_m(lr), l = cm2_row_l(lr);");
  if (v.split) {
    emitPartialRow(w, "row");
    w.line("partial_o[prow * HEAD_DIM + d] = cm2_out(lr, d);");
    w.line("if (d == 0u) partial_ml[prow] = vec2(m, l);");
  } else {
    w.line("const float scale = fa_norm_scale(m, l, batch, q_head0);");
    if (v.lse) w.line("if (d == 0u) {}", lse_detail::storeRow("batch", "q_head0", "q0 + row", "m", "l"));
    emitStore(v, w, "cm2_out(lr, d) * scale", "d");
  }
  w.close();
  w.close();
}

void emitCoopMat(const PrefillVariant& v, GlslWriter& w) {
  emitCoopMatLoop(w);
  w.line("const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;");
  if (v.quadSoftmax) {
    // Each lane knows where its elements go: stores straight from the accumulators.
    w.line("const uint lane_row = sg * 16u + (lane >> 2u), lane_col = 2u * (lane & 3u);");
    w.open("[[unroll]] for (uint e = 0u; e < CM_ELEMS; ++e)");
    w.line("const uint row = CM_ROW_OF[e] + lane_row;");
    w.line("if (row >= rows) continue;");
    if (v.split) {
      emitPartialRow(w, "row");
      w.line("[[unroll]] for (uint dd = 0u; dd < CM_D; ++dd) partial_o[prow * HEAD_DIM + dd * 16u + CM_COL_OF[e] + lane_col] = st.o[dd][e];");
      w.line("if ((lane & 3u) == 0u && CM_COL_OF[e] == 0u) partial_ml[prow] = vec2(st.m[CM_SLOT_OF[e]], st.l[CM_SLOT_OF[e]]);");
    } else {
      w.line("const float scale = fa_norm_scale(st.m[CM_SLOT_OF[e]], st.l[CM_SLOT_OF[e]], batch, q_head0);");
      if (v.lse) {
        w.line("if ((lane & 3u) == 0u && CM_COL_OF[e] == 0u) {}",
               lse_detail::storeRow("batch", "q_head0", "q0 + row", "st.m[CM_SLOT_OF[e]]", "st.l[CM_SLOT_OF[e]]"));
      }
      w.line("const uint d0 = CM_COL_OF[e] + lane_col, at = o_base + (q0 + row) * pc.o_stride_s + d0;");
      w.open("[[unroll]] for (uint dd = 0u; dd < CM_D; ++dd)");
      w.line("o[at + dd * 16u] = OUT_STORE(fa_epilogue(st.o[dd][e] * scale, batch, q_head0, pos0 + row, d0 + dd * 16u));");
      w.close();
    }
    w.close();
    return;
  }
  w.open("for (uint dd = 0u; dd < CM_D; ++dd)");
  w.line("F32MAT slice = st.o[dd];");
  if (!v.split) {
    w.open("for (uint i = 0u; i < slice.length(); ++i)");
    w.line("slice[i] *= fa_norm_scale(row_m[sg * 16u + uint(st.row_idx[i])], st.l[i], batch, q_head0);");
    w.close();
  }
  w.line("cm_stage_slice(slice);");
  w.open("for (uint e = lane; e < 256u; e += SUBGROUP_SIZE)");
  w.line("const uint row = sg * 16u + e / 16u;");
  w.line("if (row >= rows) continue;");
  if (v.split) emitPartialRow(w, "row");
  emitStore(v, w, "uintBitsToFloat(s_tile[sg * CM_S + e])", "dd * 16u + e % 16u");
  w.close();
  w.line("subgroupBarrier();");
  w.close();
  if (v.split || v.lse) {
    // Each row's sum through shared memory: lane r < 16 reads row r's.
    w.line("cm_stage_slice(st.l);");
    w.open("if (lane < 16u && sg * 16u + lane < rows)");
    if (v.split) {
      emitPartialRow(w, "sg * 16u + lane");
      w.line("partial_ml[prow] = vec2(row_m[sg * 16u + lane], uintBitsToFloat(s_tile[sg * CM_S + lane * 16u]));");
    } else {
      w.line(lse_detail::storeRow("batch", "q_head0", "q0 + sg * 16u + lane", "row_m[sg * 16u + lane]",
                                  "uintBitsToFloat(s_tile[sg * CM_S + lane * 16u])"));
    }
    w.close();
  }
}

}  // namespace

void emit(const PrefillVariant& v, GlslWriter& w) {
  w.line("probe_begin();");
  w.line("const uint split = q_slot % pc.n_splits;");
  // Causal: the longest rows (the last query tiles) of every head are dispatched first, so the short
  // ones fill the tail of the grid.
  w.line("const uint q_tiles = (pc.q_len + PF_BR - 1u) / PF_BR;");
  w.line("const uint q_tile = q_slot / pc.n_splits;");
  w.line("const uint q0 = (PF_LONGEST_FIRST ? q_tiles - 1u - q_tile : q_tile) * PF_BR;");
  w.line("const uint rows = min(PF_BR, pc.q_len - q0);");
  w.line("const uint pos0 = fa_query_pos(batch, q0), pos_hi = pos0 + rows - 1u;  // the rows' positions");
  // Only the keys the rows can see are visited; split s takes the s-th chunk of them.
  w.line("const uvec4 keys = fa_keys(batch, q_head0, pos0, pos_hi);");
  w.line("const uint kv_first = pf_first_key(keys);");
  w.line("const uint kv_begin = min(kv_first + split * pc.kv_chunk, keys.y);");
  w.line("const uint kv_end = min(kv_begin + pc.kv_chunk, keys.y);");
  if (v.coopMat) {
    if (v.coopMat2) emitCoopMat2(v, w);
    else emitCoopMat(v, w);
    w.line("probe_end();");
    return;
  }
  w.line("pf_load_q(q_base, q0, rows);");
  w.line("barrier();");
  emitTileLoop(w);
  w.line("const uint lane = gl_SubgroupInvocationID;");
  w.open("for (uint r = 0u; r < PF_ROWS; ++r)");
  w.line("const uint row = gl_SubgroupID * PF_ROWS + r;");
  w.line("if (row >= rows) break;");
  if (v.split) {
    emitPartialRow(w, "row");
    w.open("for (uint e = 0u; e < PF_DPL; ++e)");
    w.line("if (pf_lane_dim(e) < HEAD_DIM) partial_o[prow * HEAD_DIM + pf_lane_dim(e)] = st.o[r][e];");
    w.close();
    w.line("if (lane == 0u) partial_ml[prow] = vec2(st.m[r], st.l[r]);");
  } else {
    w.line("const float scale = fa_norm_scale(st.m[r], st.l[r], batch, q_head0);");
    if (v.lse) w.line("if (lane == 0u) {}", lse_detail::storeRow("batch", "q_head0", "q0 + row", "st.m[r]", "st.l[r]"));
    w.open("for (uint e = 0u; e < PF_DPL; ++e)");
    w.line("const uint d = pf_lane_dim(e);");
    w.line("if (d >= HEAD_DIM) break;");
    w.line("o[o_base + (q0 + row) * pc.o_stride_s + d] = OUT_STORE(fa_epilogue(st.o[r][e] * scale, batch, q_head0, pos0 + row, d));");
    w.close();
  }
  w.close();
  w.line("probe_end();");
}

}  // namespace foundry::prefill_detail
