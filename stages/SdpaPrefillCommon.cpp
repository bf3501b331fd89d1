#include "stages/SdpaPrefillCommon.h"

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "stages/FlashDecodeCommon.h"

namespace foundry::prefill_detail {

namespace {

void declareSubgroup(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device) {
  const std::uint32_t sg = device.subgroupSize();
  const std::uint32_t row = v.headDim + v.padElements();
  const std::string tile = v.tilesAreHalf() ? "float16_t" : "float";
  const std::uint32_t esize = v.tileBytes();
  k.define("TILE_T", tile).define("PF_STAGES", std::to_string(v.stages));
  k.constant("PF_WARPS", v.warps).constant("PF_ROWS", v.rowsPerWarp).constant("PF_BR", v.rowsPerWorkgroup());
  k.constant("PF_BC", v.keysPerTile).constant("PF_KPL", v.keysPerTile / sg).constant("PF_DPL", v.headDim / sg);
  k.constant("PF_PAD", v.padElements());
  k.shared("q_tile", tile, v.rowsPerWorkgroup() * row, esize);
  k.shared("k_tile", tile, v.stages * v.keysPerTile * row, esize);
  k.shared("v_tile", tile, v.stages * v.keysPerTile * row, esize);
  k.shared("p_tile", "float", v.rowsPerWorkgroup() * v.keysPerTile, 4);
  k.extension("GL_KHR_shader_subgroup_basic").extension("GL_KHR_shader_subgroup_arithmetic");
  k.snippet("flashattention/prefill_subgroup.glsl");
}

}  // namespace

void declare(const PrefillVariant& v, KernelInterface& k, const DeviceInfo& device) {
  const std::string reason = v.unusableReason(device.subgroupSize());
  FOUNDRY_CHECK_INTERNAL(reason.empty(), "prefill variant {}: {}", v.key(), reason);
  k.buffer("q", v.dtype, Access::ReadOnly);
  k.buffer("k_cache", v.dtype, Access::ReadOnly).buffer("v_cache", v.dtype, Access::ReadOnly);
  if (v.split) {
    k.buffer("partial_o", DType::F32, Access::WriteOnly).buffer("partial_ml", DType::F32, Access::WriteOnly, "vec2");
  } else {
    k.buffer("o", v.dtype, Access::WriteOnly);
    decode_detail::declareOutputMacros(k, v.dtype, "OUT");
  }
  k.push("qk_scale", PushType::F32).push("kv_chunk", PushType::U32).push("n_splits", PushType::U32);
  for (const char* s : {"batch", "q_head0", "q_base", "o_base", "k_base", "v_base"}) k.consumes(s, "uint");
  k.constant("HEAD_DIM", v.headDim).constant("CAUSAL", "bool", v.causal ? "true" : "false");
  declareSubgroup(v, k, device);
}

void emit(const PrefillVariant& v, GlslWriter& w) {
  w.line("const uint split = gl_WorkGroupID.x % pc.n_splits;");
  w.line("const uint q0 = (gl_WorkGroupID.x / pc.n_splits) * PF_BR;");
  w.line("const uint rows = min(PF_BR, pc.q_len - q0);");
  w.line("const uint pos0 = pc.kv_len - pc.q_len + q0;  // position of the tile's first row");
  w.line("const uint limit = CAUSAL ? min(pc.kv_len, pos0 + rows) : pc.kv_len;");
  w.line("const uint kv_begin = min(split * pc.kv_chunk, limit);");
  w.line("const uint kv_end = min(split * pc.kv_chunk + pc.kv_chunk, limit);");
  w.line("pf_load_q(q_base, q0, rows);");
  w.line("barrier();");
  w.line("PfState st;");
  w.line("prefill_subgroup(st, kv_begin, kv_end, k_base, v_base, pos0, CAUSAL, pc.qk_scale);");
  w.line("const uint lane = gl_SubgroupInvocationID;");
  w.open("for (uint r = 0u; r < PF_ROWS; ++r)");
  w.line("const uint row = gl_SubgroupID * PF_ROWS + r;");
  w.line("if (row >= rows) break;");
  if (v.split) {
    w.line("const uint prow = ((batch * pc.n_heads + q_head0) * pc.q_len + q0 + row) * pc.n_splits + split;");
    w.line("for (uint e = 0u; e < PF_DPL; ++e) partial_o[prow * HEAD_DIM + lane + e * SUBGROUP_SIZE] = st.o[r][e];");
    w.line("if (lane == 0u) partial_ml[prow] = vec2(st.m[r], st.l[r]);");
  } else {
    w.line("const float inv = st.l[r] > 0.0 ? 1.0 / st.l[r] : 0.0;");
    w.line("const uint at = o_base + (q0 + row) * pc.o_stride_s + lane;");
    w.line("for (uint e = 0u; e < PF_DPL; ++e) o[at + e * SUBGROUP_SIZE] = OUT_T(OUT_CLAMP(st.o[r][e] * inv));");
  }
  w.close();
}

}  // namespace foundry::prefill_detail
