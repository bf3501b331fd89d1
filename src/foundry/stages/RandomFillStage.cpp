#include "foundry/stages/RandomFillStage.h"

#include "foundry/StorageFormat.h"

namespace foundry {

void RandomFillStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("x", dtype_, Access::WriteOnly);
  k.push("count", PushType::U32).push("first", PushType::U32).push("seed", PushType::U32).push("scale", PushType::F32);
  k.snippet("common/random.glsl");
  glsl::declareFormat(k, dtype_);
}

void RandomFillStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.open("for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * WORKGROUP_SIZE)");
  w.line("x[i] = {};", glsl::convert(dtype_, "random_uniform(pc.seed, pc.first + i) * pc.scale"));
  w.close();
}

}  // namespace foundry
