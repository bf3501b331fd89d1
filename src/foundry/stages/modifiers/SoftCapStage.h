#pragma once
// Logit soft-capping (Gemma 2's attn_logit_softcapping): s becomes cap * tanh(s / cap).
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

class SoftCapStage : public AttentionModifier {
 public:
  explicit SoftCapStage(double cap);

  std::string name() const override { return "SoftCapStage"; }
  std::string key() const override { return wide() ? "wide" : ""; }
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  double score(double s, const HookAt& at) const override;

 private:
  /// Caps above 64 take tanh's series near 0 (kernels/modifiers/soft_cap.glsl), in a kernel of their own.
  bool wide() const { return cap_ > 64.0; }
  double cap_;
};

}  // namespace foundry
