#pragma once
// Decode attention that takes the query from RopeStage's shared buffer (q_shared), so RoPE and
// decode run as one kernel. Otherwise identical to FlashDecodeStage.
#include "foundry/Stage.h"
#include "foundry/stages/DecodeVariant.h"

namespace foundry {

class FlashDecodeFusedStage : public Stage {
 public:
  explicit FlashDecodeFusedStage(DecodeVariant variant) : v_(variant) {}
  std::string name() const override { return "FlashDecodeFusedStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return v_.key(); }

 private:
  DecodeVariant v_;
};

}  // namespace foundry
