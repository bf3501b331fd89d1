#include "foundry/stages/FlashDecodeStage.h"

#include "foundry/StorageFormat.h"
#include "foundry/stages/FlashDecodeCommon.h"

namespace foundry {

void FlashDecodeStage::declare(KernelInterface& k, const DeviceInfo& device) const {
  k.buffer("q", v_.qType(), Access::ReadOnly);
  glsl::declareRead(k, "Q_READ", v_.qType());
  k.consumes("q_base", "uint");
  k.shared("q_shared", "float", v_.heads * v_.headDim, 4);
  decode_detail::declareBody(v_, k, device);
}

void FlashDecodeStage::emit(GlslWriter& w, const DeviceInfo&) const {
  if (v_.probe) w.line("probe_begin();");
  w.open("for (uint i = gl_LocalInvocationIndex; i < DECODE_HEADS * HEAD_DIM; i += WORKGROUP_SIZE)");
  w.line("q_shared[i] = Q_READ(q[q_base + (i / HEAD_DIM) * pc.q_stride_h + i % HEAD_DIM]);");
  w.close();
  w.line("barrier();");
  decode_detail::emitBody(v_, w);
}

}  // namespace foundry
