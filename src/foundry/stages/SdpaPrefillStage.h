#pragma once
// Prefill attention (many query tokens): tiled online softmax over K tiles, causal with the query
// offset kv_len - q_len, whole tiles past the causal limit skipped, element masks only on diagonal
// tiles, double-buffered K/V staging with padded shared rows. Grid: (query tiles, heads, batch).
#include "foundry/Stage.h"
#include "foundry/stages/PrefillVariant.h"

namespace foundry {

class SdpaPrefillStage : public Stage {
 public:
  explicit SdpaPrefillStage(PrefillVariant variant);
  std::string name() const override { return "SdpaPrefillStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return v_.key(); }

 private:
  PrefillVariant v_;
};

}  // namespace foundry
