#pragma once
// Appends new K and V rows to a quantized cache (int8 or q8_0, from a KvAccessStage with write access
// earlier in the chain), rotating K (RoPE at rope_pos0 + token) on the way. The quantization policy
// lives here and only here: a block's scale is its largest |value| / 127 rounded to f16, each value the
// nearest code in -127..127. An int8 block spans 32 keys, so an append that adds rows to a block
// already holding some keeps the block's scale unless the new rows need a larger one; then the rows
// already there are requantized to the new scale (one more rounding, at most half a step of it).
// Appends fill a cache in order: rows of a block before cache_pos0 are taken as written.
//
// A workgroup of 32 invocations takes 32 consecutive keys (one block of int8 keys, 32 q8_0 rows) and
// one chunk of KV_BLOCK_DIMS dimensions; invocation t holds key t's chunk in registers. Grid: (key
// groups touched x chunks, KV heads, batch).
#include <optional>

#include "foundry/Stage.h"
#include "foundry/stages/RopeStage.h"

namespace foundry {

class KvQuantAppendStage : public Stage {
 public:
  static constexpr std::uint32_t kWorkgroup = 32;

  KvQuantAppendStage(std::uint32_t headDim, DType dtype, std::optional<RopeStageParams> rope)
      : headDim_(headDim), dtype_(dtype), rope_(rope) {}

  std::string name() const override { return "KvQuantAppendStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

  /// Workgroups along x for `tokens` new rows at cache row `pos0` of a cache with `format`'s blocks.
  static std::uint32_t groupsX(std::uint32_t headDim, DType format, std::uint32_t pos0, std::uint32_t tokens);

 private:
  std::uint32_t headDim_;
  DType dtype_;  ///< of the new rows
  std::optional<RopeStageParams> rope_;
};

}  // namespace foundry
