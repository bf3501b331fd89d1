#include "foundry/stages/FlashDecodeSplitKReduceStage.h"

#include <fmt/format.h>

#include "foundry/stages/LseOutput.h"
#include "foundry/stages/SplitKReduceCommon.h"

namespace foundry {

void FlashDecodeSplitKReduceStage::declare(KernelInterface& k, const DeviceInfo&) const {
  splitk_detail::declareReduce(k, headDim_, dtype_, lse_);
}

void FlashDecodeSplitKReduceStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint head = gl_WorkGroupID.x, batch = gl_WorkGroupID.z;");
  w.line("const uint row0 = (batch * pc.n_heads + head) * pc.n_splits;");
  w.open("for (uint d = gl_LocalInvocationIndex; d < VALUE_DIM; d += WORKGROUP_SIZE)");
  w.line("float o_merged, m_merged, l_merged;");
  w.line("splitk_merge(row0, pc.n_splits, d, o_merged, m_merged, l_merged);");
  w.line("const float out_d = fa_output(o_merged, m_merged, l_merged, batch, head, fa_query_pos(batch, 0u), d);");
  w.line("o[batch * pc.o_stride_b + head * pc.o_stride_h + d] = OUT_STORE(out_d);");
  if (lse_) w.line("if (d == 0u) {}", lse_detail::storeRow("batch", "head", "0u", "m_merged", "l_merged"));
  w.close();
}

std::string FlashDecodeSplitKReduceStage::key() const { return fmt::format("D{}_{}{}", headDim_, dtypeName(dtype_), lse_ ? "_lse" : ""); }

}  // namespace foundry
