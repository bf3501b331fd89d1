#pragma once
// Decode attention (one query token): loads the query heads into shared memory once, then streams
// the KV head's keys with an online softmax and a fused P·V. One workgroup serves all query heads of
// a GQA group (or a slice of them), so each K/V element is read once per group.
#include "foundry/Stage.h"
#include "foundry/stages/DecodeVariant.h"

namespace foundry {

class FlashDecodeStage : public Stage {
 public:
  explicit FlashDecodeStage(DecodeVariant variant) : v_(variant) {}
  std::string name() const override { return "FlashDecodeStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return v_.key(); }

 private:
  DecodeVariant v_;
};

}  // namespace foundry
