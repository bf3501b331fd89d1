#pragma once
// ALiBi: logit s of query position q and key k becomes s + slope_h * (k - q) (BLOOM, MPT; equal to
// their slope_h * k and slope_h * (k - last) within a row, where the softmax cannot tell them apart).
#include "foundry/stages/modifiers/PerHeadValues.h"

namespace foundry {

class AlibiStage : public AttentionModifier {
 public:
  /// `slopes.tensor` holds the same values as `slopes.values`; alibiSlopes() gives the usual ones.
  explicit AlibiStage(PerHeadValues slopes) : slopes_(std::move(slopes)) {}
  /// The slopes BLOOM and MPT (alibi_bias_max 8) compute from the head count: for n heads and p the
  /// largest power of two <= n, 2^(-8 (i + 1) / p) for i < p, then 2^(-4 (2 (i - p) + 1) / p).
  static std::vector<double> alibiSlopes(std::uint32_t nHeads);

  std::string name() const override { return "AlibiStage"; }
  std::string key() const override { return {}; }
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void validate(const ModifierCall& call) const override { slopes_.check(call, "alibi_slopes"); }
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  double distanceBias(std::uint32_t /*b*/, std::uint32_t h) const override { return slopes_.at(h); }

 private:
  PerHeadValues slopes_;
};

}  // namespace foundry
