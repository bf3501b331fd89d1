#pragma once
// A sliding window: query position q sees keys [q - left, q + right] (FlashAttention's window_size).
// A model's "sliding_window: W" as Hugging Face's Mistral, Gemma 2 and gpt-oss apply it (the query and
// the W - 1 keys before it) is fromModelWindow(W): left W - 1, right 0, used together with causal.
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

class SlidingWindowStage : public AttentionModifier {
 public:
  /// Extents above kMaxExtent mean "unbounded" and are kept at it.
  static constexpr std::uint32_t kMaxExtent = (1u << 31) - 1;
  SlidingWindowStage(std::uint32_t left, std::uint32_t right);
  /// The Hugging Face `sliding_window` of Mistral, Gemma 2 and gpt-oss: W keys including the query's.
  static std::shared_ptr<SlidingWindowStage> fromModelWindow(std::uint32_t window);

  std::string name() const override { return "SlidingWindowStage"; }
  std::string key() const override { return {}; }  // the extents are push constants
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void validate(const ModifierCall& call) const override;
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  bool visible(const HookAt& at) const override;
  KeyRange keyRange(const HookBlock& block) const override;

  std::uint32_t left() const { return left_; }
  std::uint32_t right() const { return right_; }

 private:
  std::uint32_t left_, right_;
};

}  // namespace foundry
