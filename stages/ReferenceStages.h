#pragma once
// The three stages of the materialised reference path (SdpaReferenceStep), each its own kernel:
//   ReferenceScoresStage:  scores = scale * Q K^T with the causal mask     grid (kv blocks, q_len, B*Hq)
//   ReferenceSoftmaxStage: a softmax over each score row, in place         grid (q_len, Hq, B)
//   ReferencePvStage:      O = P V                                         grid (D blocks, q_len, B*Hq)
#include "foundry/Stage.h"

namespace foundry {

struct ReferenceParams {
  std::uint32_t headDim = 128;
  DType dtype = DType::F16;
  bool causal = true;
  std::uint32_t workgroup = 64;  ///< a power of two; the softmax reduces over it
};

class ReferenceScoresStage : public Stage {
 public:
  explicit ReferenceScoresStage(ReferenceParams p) : p_(p) {}
  std::string name() const override { return "ReferenceScoresStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  ReferenceParams p_;
};

class ReferenceSoftmaxStage : public Stage {
 public:
  explicit ReferenceSoftmaxStage(ReferenceParams p) : p_(p) {}
  std::string name() const override { return "ReferenceSoftmaxStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  ReferenceParams p_;
};

class ReferencePvStage : public Stage {
 public:
  explicit ReferencePvStage(ReferenceParams p) : p_(p) {}
  std::string name() const override { return "ReferencePvStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  ReferenceParams p_;
};

}  // namespace foundry
