#include "foundry/stages/CeilingStages.h"

namespace foundry {

void ReadStreamStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("data", DType::F32, Access::ReadOnly, "uvec4").buffer("sink", DType::F32, Access::WriteOnly, "uint");
  k.push("count", PushType::U32).push("magic", PushType::U32).snippet("bench/read_stream.glsl");
}

void ReadStreamStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint stride = gl_NumWorkGroups.x * WORKGROUP_SIZE;");
  w.line("const uint folded = read_stream(gl_GlobalInvocationID.x, stride, pc.count);");
  w.line("if (folded == pc.magic) sink[gl_WorkGroupID.x] = folded;");
}

void MmaLoopStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("operands", DType::F16, Access::ReadOnly).buffer("result", DType::F32, Access::WriteOnly);
  k.push("iterations", PushType::U32);
  k.extension("GL_KHR_memory_scope_semantics").extension("GL_NV_cooperative_matrix");
  k.extension("GL_EXT_shader_explicit_arithmetic_types_float16").extension("GL_KHR_shader_subgroup_basic");
  k.snippet("bench/mma_loop.glsl");
}

void MmaLoopStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint subgroup = gl_WorkGroupID.x * (WORKGROUP_SIZE / SUBGROUP_SIZE) + gl_SubgroupID;");
  w.line("mma_loop(pc.iterations, subgroup * 1024u);");
}

}  // namespace foundry
