#pragma once
// Writes new K and V rows into the KV caches at row `cache_pos0 + token`, optionally rotating K (RoPE
// at position rope_pos0 + token) on the way. Grid: (new tokens, KV heads, batch). The new rows (of
// `dtype`) may be head-major [B, Hkv, T, D] or token-major [B, T, Hkv, D]: strides say which. The
// caches are written through a KvAccessStage (write access) earlier in the chain, in their format.
#include <optional>

#include "foundry/Stage.h"
#include "foundry/stages/RopeStage.h"

namespace foundry {

class KvAppendStage : public Stage {
 public:
  KvAppendStage(std::uint32_t headDim, DType dtype, std::optional<RopeStageParams> rope)
      : headDim_(headDim), dtype_(dtype), rope_(rope) {}

  std::string name() const override { return "KvAppendStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  std::uint32_t headDim_;
  DType dtype_;
  std::optional<RopeStageParams> rope_;
};

}  // namespace foundry
