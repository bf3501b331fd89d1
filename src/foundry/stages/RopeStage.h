#pragma once
// Rotary position embedding, both pairings in use (rotate-half and interleaved), any theta and
// frequency scaling (inverse frequencies arrive in a buffer), optional partial rotary dims.
//   SharedQuery: rotates the workgroup's query heads at position rope_pos0 into q_shared for a
//                following decode stage (fused RoPE -> decode), which hosts fa_kv_len: a sequence
//                shorter than kv_len has its query that many positions earlier.
//   InPlace:     rotates a whole Q or K tensor in place, one workgroup per (token, head, batch);
//                token t sits at position rope_pos0 + t.
#include "foundry/Stage.h"

namespace foundry {

struct RopeStageParams {
  std::uint32_t headDim = 128;
  std::uint32_t rotaryDims = 128;
  bool interleaved = false;
  DType dtype = DType::F16;
  std::uint32_t heads = 1;  ///< SharedQuery: query heads per workgroup
};

class RopeStage : public Stage {
 public:
  enum class Mode { SharedQuery, InPlace };
  RopeStage(Mode mode, RopeStageParams params) : mode_(mode), p_(params) {}

  std::string name() const override { return "RopeStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

  /// The macros and buffer rope.glsl needs; KvAppendStage uses them too.
  static void declareRope(KernelInterface& k, const RopeStageParams& p);

 private:
  Mode mode_;
  RopeStageParams p_;
};

}  // namespace foundry
