#pragma once
// Sequences of different lengths decoding (or prefilling) together: sequence b holds lengths[b] keys
// of the cache, and its queries sit at its own end. The call's kv_len is the longest; every length
// lies in [q_len, kv_len].
#include <vector>

#include "foundry/Tensor.h"
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

class KeyLengthsStage : public AttentionModifier {
 public:
  /// `tensor`: u32 [batch] holding `lengths`.
  KeyLengthsStage(Tensor tensor, std::vector<std::uint32_t> lengths)
      : tensor_(std::move(tensor)), lengths_(std::move(lengths)) {}

  std::string name() const override { return "KeyLengthsStage"; }
  std::string key() const override { return {}; }
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void validate(const ModifierCall& call) const override;
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  std::optional<std::uint32_t> kvLength(std::uint32_t b) const override { return lengths_.at(b); }

 private:
  Tensor tensor_;
  std::vector<std::uint32_t> lengths_;
};

}  // namespace foundry
