#include "foundry/stages/LseMergeStage.h"

#include <fmt/format.h>

#include "foundry/StorageFormat.h"
#include "foundry/stages/FlashDecodeCommon.h"
#include "foundry/stages/LseOutput.h"

namespace foundry {

std::string LseMergeStage::partOutput(std::uint32_t i) { return fmt::format("part{}_o", i); }
std::string LseMergeStage::partLse(std::uint32_t i) { return fmt::format("part{}_lse", i); }

void LseMergeStage::declare(KernelInterface& k, const DeviceInfo&) const {
  for (std::uint32_t i = 0; i < p_.parts; ++i) {
    k.buffer(partOutput(i), p_.partDtype, Access::ReadOnly).buffer(partLse(i), DType::F32, Access::ReadOnly);
  }
  k.buffer("o", p_.outDtype, Access::WriteOnly);
  k.push("n_heads", PushType::U32).push("q_len", PushType::U32);
  // The parts share one layout; the output has its own.
  for (const char* s : {"part_stride_b", "part_stride_h", "part_stride_s", "o_stride_b", "o_stride_h", "o_stride_s"}) {
    k.push(s, PushType::U32);
  }
  if (p_.lse) lse_detail::declare(k);
  k.constant("VALUE_DIM", p_.valueDim);
  glsl::declareWrite(k, "OUT_STORE", p_.outDtype);
  glsl::declareRead(k, "PART_READ", p_.partDtype);
  k.snippet("flashattention/common.glsl");
}

void LseMergeStage::emit(GlslWriter& w, const DeviceInfo&) const {
  // Rows past the grid's 65535 in x continue in z, one batch after another (MergeStep's grid).
  w.line("const uint q_chunks = (pc.q_len + 65534u) / 65535u;");
  w.line("const uint token = gl_WorkGroupID.x + (gl_WorkGroupID.z % q_chunks) * 65535u;");
  w.line("const uint head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z / q_chunks;");
  w.line("if (token >= pc.q_len) return;");
  w.line("const uint part_row = batch * pc.part_stride_b + head * pc.part_stride_h + token * pc.part_stride_s;");
  w.line("const uint o_row = batch * pc.o_stride_b + head * pc.o_stride_h + token * pc.o_stride_s;");
  w.line("const uint lse_row = {};", lse_detail::row("batch", "head", "token"));
  // Every part's (m, l) once per row, relative to the row's largest LSE: an LSE of 1e6 scaled to log2
  // units whole would round by 0.06 (weights off by 4%); the differences scale exactly enough. The floor
  // keeps a row whose parts all saw nothing (-inf) from -inf - -inf. Then each dimension folds the parts.
  std::string top = "-3.0e38";
  for (std::uint32_t i = 0; i < p_.parts; ++i) {
    w.line("const float lse{} = {}[lse_row];", i, partLse(i));
    top = fmt::format("max({}, lse{})", top, i);
  }
  w.line("const float lse_top = {};", top);
  for (std::uint32_t i = 0; i < p_.parts; ++i) w.line("const vec2 ml{0} = softmax_state_of_lse(lse{0} - lse_top);", i);
  w.open("for (uint d = gl_LocalInvocationIndex; d < VALUE_DIM; d += WORKGROUP_SIZE)");
  w.line("float m = NEG_BIG, l = 0.0, acc = 0.0;");
  for (std::uint32_t i = 0; i < p_.parts; ++i) {
    w.line("softmax_fold(m, l, acc, ml{0}.x, ml{0}.y, PART_READ({1}[part_row + d]));", i, partOutput(i));
  }
  w.line("o[o_row + d] = OUT_STORE(acc * softmax_inverse(l));");
  if (p_.lse) w.line("if (d == 0u) lse[lse_row] = lse_top + softmax_lse(m, l);");
  w.close();
}

std::string LseMergeStage::key() const {
  return fmt::format("p{}_D{}_{}_to_{}{}", p_.parts, p_.valueDim, dtypeName(p_.partDtype), dtypeName(p_.outDtype),
                     p_.lse ? "_lse" : "");
}

}  // namespace foundry
