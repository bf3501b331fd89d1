#include "foundry/stages/TokenCopyStage.h"

namespace foundry {

void TokenCopyStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("src", dtype_, Access::ReadOnly).buffer("dst", dtype_, Access::WriteOnly);
  k.push("count", PushType::U32).push("src_first", PushType::U32).push("dst_first", PushType::U32);
}

void TokenCopyStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.open("for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * WORKGROUP_SIZE)");
  w.line("dst[pc.dst_first + i] = src[pc.src_first + i];");
  w.close();
}

}  // namespace foundry
