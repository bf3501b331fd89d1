#include "foundry/stages/modifiers/CausalStage.h"

#include "foundry/stages/AttentionHooks.h"

namespace foundry {

std::string CausalStage::describe() const {
  return align_ == Align::BottomRight ? "causal (bottom-right)" : "causal (top-left)";
}

void CausalStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.snippet("modifiers/causal.glsl").usesPush("q_len");
  const bool br = align_ == Align::BottomRight;
  // An interval of keys per query: the range is the whole mask (fa_row_span), no fa_visible needed.
  k.hook(hook::kKeyRange, br ? "causal_key_range" : "causal_top_left_key_range");
}

bool CausalStage::visible(const HookAt& at) const {
  return at.k <= (align_ == Align::BottomRight ? at.q : at.queryIndex());
}

KeyRange CausalStage::keyRange(const HookBlock& x) const {
  const std::uint32_t shift = align_ == Align::BottomRight ? 0 : x.offset;
  return {0, x.qHi - shift + 1, 0, x.qLo - shift + 1};
}

}  // namespace foundry
