#include "foundry/stages/RopeStage.h"

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

void RopeStage::declareRope(KernelInterface& k, const RopeStageParams& p) {
  FOUNDRY_CHECK_INTERNAL(p.rotaryDims > 0 && p.rotaryDims <= p.headDim && p.rotaryDims % 2 == 0,
                         "rotary dims {} must be even and within head_dim {}", p.rotaryDims, p.headDim);
  k.buffer("rope_inv_freq", DType::F32, Access::ReadOnly).push("rope_pos0", PushType::U32).push("rope_scale", PushType::F32);
  k.define("ROPE_DIMS", fmt::format("{}u", p.rotaryDims)).define("ROPE_INTERLEAVED", p.interleaved ? "1" : "0");
  k.constant("HEAD_DIM", p.headDim);
  k.snippet("rope/rope.glsl");
  glsl::declareRead(k, "ROPE_READ", p.dtype);
}

void RopeStage::declare(KernelInterface& k, const DeviceInfo&) const {
  declareRope(k, p_);
  if (mode_ == Mode::SharedQuery) {
    k.buffer("q", p_.dtype, Access::ReadOnly);
    k.consumes("q_base", "uint").consumes("batch", "uint").usesPush("q_stride_h").usesPush("kv_len");
    k.shared("q_shared", "float", p_.heads * p_.headDim, 4);
  } else {
    k.buffer("x", p_.dtype, Access::ReadWrite);
    for (const char* f : {"x_stride_b", "x_stride_h", "x_stride_s"}) k.push(f, PushType::U32);
  }
}

void RopeStage::emit(GlslWriter& w, const DeviceInfo&) const {
  if (mode_ == Mode::SharedQuery) {
    // rope_pos0 is the query position of a sequence of kv_len keys; a shorter one (per-sequence
    // lengths, the fa_kv_len hook of the decode stage that follows) has its query that much earlier.
    w.line("const uint rope_pos = pc.rope_pos0 + fa_kv_len(batch) - pc.kv_len;");
    w.open("for (uint i = gl_LocalInvocationIndex; i < {}u * HEAD_DIM; i += WORKGROUP_SIZE)", p_.heads);
    w.line("const uint row = q_base + (i / HEAD_DIM) * pc.q_stride_h, d = i % HEAD_DIM;");
    w.line("const float x_d = ROPE_READ(q[row + d]);");
    w.line("q_shared[i] = d < ROPE_DIMS ? rope_rotate(d, rope_pos, x_d, ROPE_READ(q[row + rope_partner(d)])) : x_d;");
    w.close();
    w.line("barrier();");
    return;
  }
  w.line("const uint row = gl_WorkGroupID.z * pc.x_stride_b + gl_WorkGroupID.y * pc.x_stride_h + gl_WorkGroupID.x * pc.x_stride_s;");
  w.line("const uint pos = pc.rope_pos0 + gl_WorkGroupID.x;");
  // Each invocation owns whole pairs, so reading both elements before writing either is race-free.
  w.open("for (uint d = gl_LocalInvocationIndex; d < ROPE_DIMS; d += WORKGROUP_SIZE)");
  w.line("const uint p = rope_partner(d);");
  w.line("if (p < d) continue;");
  w.line("const float a = ROPE_READ(x[row + d]), b = ROPE_READ(x[row + p]);");
  w.line("x[row + d] = {};", glsl::convert(p_.dtype, "rope_rotate(d, pos, a, b)"));
  w.line("x[row + p] = {};", glsl::convert(p_.dtype, "rope_rotate(p, pos, b, a)"));
  w.close();
}

std::string RopeStage::key() const {
  return fmt::format("{}_D{}_r{}_{}_{}{}", mode_ == Mode::SharedQuery ? "q" : "inplace", p_.headDim, p_.rotaryDims,
                     p_.interleaved ? "gptj" : "neox", dtypeName(p_.dtype),
                     mode_ == Mode::SharedQuery ? fmt::format("_h{}", p_.heads) : "");
}

}  // namespace foundry
