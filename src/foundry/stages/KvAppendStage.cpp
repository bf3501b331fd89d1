#include "foundry/stages/KvAppendStage.h"

#include <fmt/format.h>

namespace foundry {

void KvAppendStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("k_new", dtype_, Access::ReadOnly).buffer("v_new", dtype_, Access::ReadOnly);
  k.buffer("k_cache", dtype_, Access::WriteOnly).buffer("v_cache", dtype_, Access::WriteOnly);
  for (const char* f : {"new_stride_b", "new_stride_h", "new_stride_s", "k_stride_b", "k_stride_h", "v_stride_b",
                        "v_stride_h", "cache_pos0"}) {
    k.push(f, PushType::U32);
  }
  k.constant("HEAD_DIM", headDim_);
  if (rope_) RopeStage::declareRope(k, *rope_);
}

void KvAppendStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint token = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;");
  w.line("const uint src = batch * pc.new_stride_b + kv_head * pc.new_stride_h + token * pc.new_stride_s;");
  w.line("const uint k_dst = batch * pc.k_stride_b + kv_head * pc.k_stride_h + (pc.cache_pos0 + token) * HEAD_DIM;");
  w.line("const uint v_dst = batch * pc.v_stride_b + kv_head * pc.v_stride_h + (pc.cache_pos0 + token) * HEAD_DIM;");
  w.open("for (uint d = gl_LocalInvocationIndex; d < HEAD_DIM; d += WORKGROUP_SIZE)");
  if (rope_) {
    w.line("const float k_d = float(k_new[src + d]);");
    w.line("const float k_rot = d < ROPE_DIMS ? rope_rotate(d, pc.rope_pos0 + token, k_d, float(k_new[src + rope_partner(d)])) : k_d;");
    w.line("k_cache[k_dst + d] = {}(k_rot);", glslScalarType(dtype_));
  } else {
    w.line("k_cache[k_dst + d] = k_new[src + d];");
  }
  w.line("v_cache[v_dst + d] = v_new[src + d];");
  w.close();
}

std::string KvAppendStage::key() const {
  return fmt::format("D{}_{}{}", headDim_, dtypeName(dtype_),
                     rope_ ? fmt::format("_rope_r{}_{}", rope_->rotaryDims, rope_->interleaved ? "gptj" : "neox") : "");
}

}  // namespace foundry
