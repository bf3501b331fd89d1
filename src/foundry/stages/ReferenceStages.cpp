#include "foundry/stages/ReferenceStages.h"

#include <fmt/format.h>

#include "foundry/StorageFormat.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/FlashDecodeCommon.h"
#include "foundry/stages/HeadLayoutStage.h"

namespace foundry {

namespace {

void declareCommon(const ReferenceParams& p, KernelInterface& k, const std::set<std::string>& hooks) {
  HeadLayoutStage::declareShapeFields(k);
  HeadLayoutStage::declareRows(k, p.headDim, p.valueDim);
  k.snippet("softmax/reference.glsl");
  hostAttentionHooks(k, hooks);
}

std::string keyOf(const ReferenceParams& p) {
  std::string key = fmt::format("{}_{}", HeadLayoutStage::rowsKey(p.headDim, p.valueDim), dtypeName(p.dtype));
  if (p.qType != p.dtype) key += fmt::format("_q{}", dtypeName(p.qType));
  if (p.oType != p.dtype) key += fmt::format("_o{}", dtypeName(p.oType));
  return key;
}

// Grid y is the token, grid z is batch * n_heads + head.
void emitRowIndices(GlslWriter& w) {
  w.line("const uint token = gl_WorkGroupID.y;");
  w.line("const uint batch = gl_WorkGroupID.z / pc.n_heads, head = gl_WorkGroupID.z % pc.n_heads;");
  w.line("const uint kv_head = head / (pc.n_heads / pc.n_kv_heads);");
  w.line("const uint row = ref_row(batch, head, token);");
}

}  // namespace

std::set<std::string> ReferenceScoresStage::hookPoints() {
  return {hook::kKvLen, hook::kDistanceBias, hook::kScore, hook::kVisible, hook::kKeyRange};
}
std::set<std::string> ReferenceSoftmaxStage::hookPoints() { return {hook::kKvLen, hook::kSink}; }
std::set<std::string> ReferencePvStage::hookPoints() { return {hook::kKvLen, hook::kEpilogue}; }

void ReferenceScoresStage::declare(KernelInterface& k, const DeviceInfo&) const {
  declareCommon(p_, k, hookPoints());
  k.buffer("q", p_.qType, Access::ReadOnly).usesBuffer("k_cache");
  glsl::declareRead(k, "Q_READ", p_.qType);
  k.buffer("scores", DType::F32, Access::WriteOnly).push("scale", PushType::F32);
}

void ReferenceScoresStage::emit(GlslWriter& w, const DeviceInfo&) const {
  emitRowIndices(w);
  w.line("const uint key = gl_GlobalInvocationID.x;");
  w.line("const uint q_pos = fa_query_pos(batch, token);");
  w.open("if (key < pc.kv_len)");
  w.line("const uint qa = batch * pc.q_stride_b + head * pc.q_stride_h + token * pc.q_stride_s;");
  w.line("const KV_ROW ka = kv_k_row(batch, kv_head, key);");
  w.line("float s = 0.0;");
  w.line("for (uint d = 0u; d < HEAD_DIM; ++d) s += Q_READ(q[qa + d]) * kv_load_k(ka, d);");
  w.line("const bool seen = fa_key_visible(fa_keys(batch, head, q_pos, q_pos), batch, head, q_pos, key);");
  w.line("scores[row * pc.kv_len + key] = seen ? fa_score_natural(s * pc.scale, batch, head, q_pos, key) : NEG_BIG;");
  w.close();
}

std::string ReferenceScoresStage::key() const { return keyOf(p_); }

void ReferenceSoftmaxStage::declare(KernelInterface& k, const DeviceInfo&) const {
  declareCommon(p_, k, hookPoints());
  k.buffer("scores", DType::F32, Access::ReadWrite);
  k.shared("ref_scratch", "float", p_.workgroup, 4).snippet("softmax/workgroup_reduce.glsl");
}

void ReferenceSoftmaxStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint batch = gl_WorkGroupID.z, head = gl_WorkGroupID.y;");
  w.line("const uint row = ref_row(batch, head, gl_WorkGroupID.x) * pc.kv_len;");
  // A sink joins the denominator: the maximum and the sum take it in, no output weight does.
  w.line("const float sink_logit = FA_SINK_HOOKED ? fa_sink(batch, head) : NEG_BIG;");
  w.line("const float sink = softmax_hidden(sink_logit) ? NEG_BIG : sink_logit;");
  w.line("float m = NEG_BIG;");
  w.line("for (uint j = gl_LocalInvocationIndex; j < pc.kv_len; j += WORKGROUP_SIZE) m = max(m, scores[row + j]);");
  w.line("m = max(ref_reduce(m, true), sink);");
  w.line("float l = 0.0;");
  w.open("for (uint j = gl_LocalInvocationIndex; j < pc.kv_len; j += WORKGROUP_SIZE)");
  w.line("const float s = scores[row + j];");
  w.line("l += softmax_hidden(s) ? 0.0 : exp(s - m);");
  w.close();
  w.line("l = ref_reduce(l, false) + (FA_SINK_HOOKED ? exp(sink - m) : 0.0);");
  w.open("for (uint j = gl_LocalInvocationIndex; j < pc.kv_len; j += WORKGROUP_SIZE)");
  w.line("const float s = scores[row + j];");
  w.line("scores[row + j] = softmax_hidden(s) ? 0.0 : exp(s - m) * softmax_inverse(l);");
  w.close();
}

std::string ReferenceSoftmaxStage::key() const { return keyOf(p_); }

void ReferencePvStage::declare(KernelInterface& k, const DeviceInfo&) const {
  declareCommon(p_, k, hookPoints());
  k.extension("GL_EXT_control_flow_attributes");
  k.buffer("scores", DType::F32, Access::ReadOnly).usesBuffer("v_cache");
  k.buffer("o", p_.oType, Access::WriteOnly);
  glsl::declareWrite(k, "OUT_STORE", p_.oType);
}

void ReferencePvStage::emit(GlslWriter& w, const DeviceInfo&) const {
  emitRowIndices(w);
  w.line("const uint d = gl_GlobalInvocationID.x;");
  w.open("if (d < VALUE_DIM)");
  w.line("float acc = 0.0;");
  // Only the sequence's own keys: rows past them are not its values (0 * NaN would still be NaN).
  w.line("const uint keys = fa_kv_len(batch);");
  // kReferencePvKeysPerPass keys a pass, added in order (the sums of one key at a time): llvmpipe's loop
  // limit (DeviceInfo::loopLimit) then covers that many times the keys.
  w.line("uint j = 0u;");
  w.open("for (; j + {}u <= keys; j += {}u)", kReferencePvKeysPerPass, kReferencePvKeysPerPass);
  w.line("[[unroll]] for (uint u = 0u; u < {}u; ++u) acc += scores[row * pc.kv_len + j + u] * "
         "kv_load_v(kv_v_row(batch, kv_head, j + u), d);", kReferencePvKeysPerPass);
  w.close();
  w.line("for (; j < keys; ++j) acc += scores[row * pc.kv_len + j] * kv_load_v(kv_v_row(batch, kv_head, j), d);");
  w.line("const float out_d = fa_epilogue(acc, batch, head, fa_query_pos(batch, token), d);");
  w.line("o[batch * pc.o_stride_b + head * pc.o_stride_h + token * pc.o_stride_s + d] = OUT_STORE(out_d);");
  w.close();
}

std::string ReferencePvStage::key() const { return keyOf(p_); }

}  // namespace foundry
