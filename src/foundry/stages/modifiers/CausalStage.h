#pragma once
// The causal mask as a modifier. BottomRight: query position q sees keys k <= q, so the last query of
// a chunk sees the whole cache (decode and chunked prefill with a KV cache). TopLeft: query index i
// of the call sees keys k <= i (PyTorch's is_causal for q_len != kv_len).
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

class CausalStage : public AttentionModifier {
 public:
  enum class Align { BottomRight, TopLeft };
  explicit CausalStage(Align align = Align::BottomRight) : align_(align) {}

  std::string name() const override { return "CausalStage"; }
  std::string key() const override { return align_ == Align::BottomRight ? "bottom_right" : "top_left"; }
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;

  bool isIdentityFor(const ModifierCall& call) const override {
    return align_ == Align::BottomRight && call.qLen == 1;
  }
  bool visible(const HookAt& at) const override;
  KeyRange keyRange(const HookBlock& block) const override;

  Align align() const { return align_; }

 private:
  Align align_;
};

}  // namespace foundry
