#include "foundry/stages/SdpaPrefillSplitKReduceStage.h"

#include <fmt/format.h>

#include "foundry/stages/LseOutput.h"
#include "foundry/stages/SplitKReduceCommon.h"

namespace foundry {

void SdpaPrefillSplitKReduceStage::declare(KernelInterface& k, const DeviceInfo&) const {
  splitk_detail::declareReduce(k, headDim_, dtype_, lse_);
}

void SdpaPrefillSplitKReduceStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint token = gl_WorkGroupID.x, head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;");
  w.line("const uint row0 = ((batch * pc.n_heads + head) * pc.q_len + token) * pc.n_splits;");
  w.line("const uint o_row = batch * pc.o_stride_b + head * pc.o_stride_h + token * pc.o_stride_s;");
  w.open("for (uint d = gl_LocalInvocationIndex; d < VALUE_DIM; d += WORKGROUP_SIZE)");
  w.line("float o_merged, m_merged, l_merged;");
  w.line("splitk_merge(row0, pc.n_splits, d, o_merged, m_merged, l_merged);");
  w.line("o[o_row + d] = OUT_STORE(fa_output(o_merged, m_merged, l_merged, batch, head, fa_query_pos(batch, token), d));");
  if (lse_) w.line("if (d == 0u) {}", lse_detail::storeRow("batch", "head", "token", "m_merged", "l_merged"));
  w.close();
}

std::string SdpaPrefillSplitKReduceStage::key() const { return fmt::format("D{}_{}{}", headDim_, dtypeName(dtype_), lse_ ? "_lse" : ""); }

}  // namespace foundry
