#pragma once
// Logit soft-capping (Gemma 2's attn_logit_softcapping): s becomes cap * tanh(s / cap).
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

class SoftCapStage : public AttentionModifier {
 public:
  explicit SoftCapStage(double cap);

  std::string name() const override { return "SoftCapStage"; }
  std::string key() const override { return {}; }
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  double score(double s, const HookAt& at) const override;

 private:
  double cap_;
};

}  // namespace foundry
