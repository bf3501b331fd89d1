#pragma once
// Attention sinks (gpt-oss): a learned logit per query head in the softmax denominator only,
// out = sum_j e^(s_j) v_j / (e^sink + sum_j e^(s_j)). A row that sees no key still gives 0.
#include "foundry/stages/modifiers/PerHeadValues.h"

namespace foundry {

class SinksStage : public AttentionModifier {
 public:
  explicit SinksStage(PerHeadValues logits) : logits_(std::move(logits)) {}

  std::string name() const override { return "SinksStage"; }
  std::string key() const override { return {}; }
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void validate(const ModifierCall& call) const override { logits_.check(call, "sinks"); }
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  std::optional<double> sink(std::uint32_t b, std::uint32_t h) const override;

 private:
  PerHeadValues logits_;
};

}  // namespace foundry
