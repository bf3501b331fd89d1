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
  w.line("float o_merged[SPLITK_PER_INVOCATION], m_merged[SPLITK_PER_INVOCATION], l_merged[SPLITK_PER_INVOCATION];");
  w.line("splitk_merge(row0, pc.n_splits, o_merged, m_merged, l_merged);");
  w.open("[[unroll]] for (uint r = 0u; r < SPLITK_PER_INVOCATION; ++r)");
  w.line("const uint d = splitk_index(r);");
  w.open("if (d < VALUE_DIM)");
  w.line("const float out_d = fa_output(o_merged[r], m_merged[r], l_merged[r], batch, head, fa_query_pos(batch, 0u), d);");
  w.line("o[batch * pc.o_stride_b + head * pc.o_stride_h + d] = OUT_STORE(out_d);");
  if (lse_) w.line("if (d == 0u) {}", lse_detail::storeRow("batch", "head", "0u", "m_merged[r]", "l_merged[r]"));
  w.close();
  w.close();
}

std::string FlashDecodeSplitKReduceStage::key() const { return fmt::format("D{}_{}{}", headDim_, dtypeName(dtype_), lse_ ? "_lse" : ""); }

}  // namespace foundry
