#pragma once
// An explicit mask tensor [Bm, Hm, q_len, columns], Bm in {1, batch} and Hm in {1, query heads}
// (broadcast where 1), indexed by the query's index in the call and the key:
//   additive (f16 or f32): the value is added to the logit; a value at or below -65504 (f16's lowest,
//                          or -inf) hides the key;
//   bits (u32):            bit k % 32 of word k / 32 of the row is set where key k is visible.
// Before a tiled kernel runs, a pass (MaskBlockMapStage) marks the tiles that hold any visible key;
// the kernel never loads K/V for the others.
#include <vector>

#include "foundry/Tensor.h"
#include "foundry/stages/AttentionModifier.h"

namespace foundry {

enum class MaskKind { Additive, Bits };

class MaskStage : public AttentionModifier {
 public:
  static std::shared_ptr<MaskStage> additive(Tensor mask, std::vector<float> host);
  static std::shared_ptr<MaskStage> bits(Tensor mask, std::vector<std::uint32_t> host);

  std::string name() const override { return "MaskStage"; }
  std::string key() const override;
  std::string describe() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void validate(const ModifierCall& call) const override;
  void bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const override;
  std::vector<ModifierPass> passes(const ModifierCall& call, Workspace& ws, TileShape tile) const override;

  double score(double s, const HookAt& at) const override;
  bool visible(const HookAt& at) const override;
  KeyRange keyRange(const HookBlock&) const override { return {0, KeyRange::kEnd, 0, 0}; }

  MaskKind kind() const { return kind_; }
  /// The GLSL name of the mask buffer, the push fields that address it, and how they are set.
  static void declareAccess(KernelInterface& k, MaskKind kind, DType dtype);
  void setAccess(Arguments& args) const;

 private:
  MaskStage(Tensor mask, MaskKind kind) : mask_(std::move(mask)), kind_(kind) {}
  std::size_t row(const HookAt& at) const;
  Tensor blocks(const ModifierCall& call, Workspace& ws, TileShape tile) const;

  Tensor mask_;
  MaskKind kind_;
  std::vector<float> additive_;
  std::vector<std::uint32_t> bits_;
};

/// The mask's block map pass: entry (bm, hm, query tile, key tile) is 1 where any element of that
/// tile is visible. Grid (key tiles, query tiles, Bm * Hm).
class MaskBlockMapStage : public Stage {
 public:
  MaskBlockMapStage(MaskKind kind, DType dtype) : kind_(kind), dtype_(dtype) {}
  std::string name() const override { return "MaskBlockMapStage"; }
  std::string key() const override;
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;

 private:
  MaskKind kind_;
  DType dtype_;
};

}  // namespace foundry
