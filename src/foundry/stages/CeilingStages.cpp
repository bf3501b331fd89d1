#include "foundry/stages/CeilingStages.h"

namespace foundry {

void ReadStreamStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("data", DType::F32, Access::ReadOnly, "uvec4").buffer("sink", DType::F32, Access::WriteOnly, "uint");
  k.push("count", PushType::U32).push("magic", PushType::U32);
  k.extension("GL_EXT_control_flow_attributes").define("READ_LOADS", std::to_string(loads_) + "u");
  k.define("READ_SIDES", std::to_string(sides_) + "u");
  k.snippet("bench/read_stream.glsl");
}

void ReadStreamStage::emit(GlslWriter& w, const DeviceInfo&) const {
  if (order_ == Order::Blocked && split_ * sides_ > 1) {
    // Its share in parts, each read by one group of invocations, each part's sides read side by side.
    w.line(fmt::format("const uint group = WORKGROUP_SIZE / {}u;", split_));
    w.line(fmt::format("const uint part = pc.count / (gl_NumWorkGroups.x * {}u);", split_ * sides_));
    w.line(
        fmt::format("const uint base = (gl_WorkGroupID.x * {}u + gl_LocalInvocationID.x / group) * part * "
                    "READ_SIDES;",
                    split_));
    w.line("const uint folded = read_sides(base, gl_LocalInvocationID.x % group, group, part);");
  } else if (order_ != Order::Grid) {
    // Workgroup w reads its own contiguous share, as a decode workgroup reads its split of the cache.
    w.line("const uint share = (pc.count + gl_NumWorkGroups.x - 1u) / gl_NumWorkGroups.x;");
    w.line("const uint begin = gl_WorkGroupID.x * share, end = min(begin + share, pc.count);");
    w.line(fmt::format("const uint folded = {}(begin + gl_LocalInvocationID.x, WORKGROUP_SIZE, end);",
                       order_ == Order::Ring ? "read_ring" : "read_stream"));
  } else {
    // Grid-strided: consecutive invocations read consecutive addresses.
    w.line("const uint folded = read_stream(gl_GlobalInvocationID.x, gl_NumWorkGroups.x * WORKGROUP_SIZE, pc.count);");
  }
  w.line("if (folded == pc.magic) sink[gl_WorkGroupID.x] = folded;");
}

void CoopMat2ReadStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("data", DType::F32, Access::ReadOnly, "uvec4").buffer("sink", DType::F32, Access::WriteOnly, "float");
  k.push("count", PushType::U32).push("magic", PushType::U32);
  k.extension("GL_KHR_memory_scope_semantics").extension("GL_KHR_cooperative_matrix");
  k.extension("GL_NV_cooperative_matrix2").extension("GL_EXT_shader_explicit_arithmetic_types_float16");
  k.extension("GL_EXT_control_flow_attributes").define("READ_LOADS", std::to_string(loads_) + "u");
  k.snippet("bench/read_coopmat2.glsl");
}

void CoopMat2ReadStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("read_coopmat2(pc.count / 16u);  // rows of 128 f16 (16 16-byte pieces)");
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
