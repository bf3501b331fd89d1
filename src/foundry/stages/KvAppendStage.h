#pragma once
// Writes new K and V rows into the KV caches at row `cache_pos0 + token`, optionally rotating K (RoPE
// at position rope_pos0 + token) on the way. Grid: (new tokens, KV heads, batch). The new rows (of
// `dtype`) may be head-major [B, Hkv, T, D] or token-major [B, T, Hkv, D]: strides say which. The
// caches are written through a KvAccessStage (write access) earlier in the chain, in their format.
// With `keysOnly` it writes K alone (a cache whose values are a view of its key rows: absorbed MLA);
// with a `valueDim` of its own (DeepSeek-V2's 128 against 192) the V rows have their own width and
// strides (v_new_stride_*).
#include <optional>

#include "foundry/Stage.h"
#include "foundry/stages/RopeStage.h"

namespace foundry {

class KvAppendStage : public Stage {
 public:
  /// `valueDim` 0: V rows as wide as K rows, with K's strides.
  KvAppendStage(std::uint32_t headDim, DType dtype, std::optional<RopeStageParams> rope, bool keysOnly = false,
                std::uint32_t valueDim = 0)
      : headDim_(headDim), dtype_(dtype), rope_(rope), keysOnly_(keysOnly), valueDim_(valueDim) {}

  std::string name() const override { return "KvAppendStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  std::uint32_t headDim_;
  DType dtype_;
  std::optional<RopeStageParams> rope_;
  bool keysOnly_;
  std::uint32_t valueDim_;
};

}  // namespace foundry
