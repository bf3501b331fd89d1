#include "foundry/stages/KvAppendStage.h"

#include <fmt/format.h>

#include "foundry/StorageFormat.h"

namespace foundry {

void KvAppendStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("k_new", dtype_, Access::ReadOnly).usesBuffer("k_cache");  // a keysOnly KvAccessStage has no v_cache
  if (!keysOnly_) k.buffer("v_new", dtype_, Access::ReadOnly).usesBuffer("v_cache");
  for (const char* f : {"new_stride_b", "new_stride_h", "new_stride_s", "cache_pos0"}) k.push(f, PushType::U32);
  glsl::declareRead(k, "NEW_READ", dtype_);
  k.constant("HEAD_DIM", headDim_);
  if (valueDim_) {
    for (const char* f : {"v_new_stride_b", "v_new_stride_h", "v_new_stride_s"}) k.push(f, PushType::U32);
    k.constant("VALUE_DIM", valueDim_);
  }
  if (rope_) RopeStage::declareRope(k, *rope_);
}

void KvAppendStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint token = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;");
  w.line("const uint src = batch * pc.new_stride_b + kv_head * pc.new_stride_h + token * pc.new_stride_s;");
  w.line("const KV_ROW k_dst = kv_k_row(batch, kv_head, pc.cache_pos0 + token);");
  if (!keysOnly_) w.line("const KV_ROW v_dst = kv_v_row(batch, kv_head, pc.cache_pos0 + token);");
  w.open("for (uint d = gl_LocalInvocationIndex; d < HEAD_DIM; d += WORKGROUP_SIZE)");
  w.line("const float k_d = NEW_READ(k_new[src + d]);");
  if (rope_) {
    w.line("kv_store_k(k_dst, d, d < ROPE_DIMS ? rope_rotate(d, pc.rope_pos0 + token, k_d, "
           "NEW_READ(k_new[src + rope_partner(d)])) : k_d);");
  } else {
    w.line("kv_store_k(k_dst, d, k_d);");
  }
  if (!keysOnly_ && !valueDim_) w.line("kv_store_v(v_dst, d, NEW_READ(v_new[src + d]));");
  w.close();
  if (valueDim_) {
    w.line("const uint v_src = batch * pc.v_new_stride_b + kv_head * pc.v_new_stride_h + token * pc.v_new_stride_s;");
    w.open("for (uint d = gl_LocalInvocationIndex; d < VALUE_DIM; d += WORKGROUP_SIZE)");
    w.line("kv_store_v(v_dst, d, NEW_READ(v_new[v_src + d]));");
    w.close();
  }
}

std::string KvAppendStage::key() const {
  return fmt::format("D{}_{}{}{}{}", headDim_, dtypeName(dtype_),
                     rope_ ? fmt::format("_rope_r{}_{}", rope_->rotaryDims, rope_->interleaved ? "gptj" : "neox") : "",
                     keysOnly_ ? "_keys" : "", valueDim_ ? fmt::format("_v{}", valueDim_) : "");
}

}  // namespace foundry
