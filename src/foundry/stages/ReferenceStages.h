#pragma once
// The three stages of the materialised reference path (SdpaReferenceStep), each its own kernel:
//   ReferenceScoresStage:  scores = scale * Q K^T through the masks and score hooks
//                                                                          grid (kv blocks, q_len, B*Hq)
//   ReferenceSoftmaxStage: a softmax over each score row, in place, sinks in its denominator
//                                                                          grid (q_len, Hq, B)
//   ReferencePvStage:      O = P V through the epilogue hooks              grid (D blocks, q_len, B*Hq)
// Each kernel hosts the hook points it calls (foundry/stages/AttentionHooks.h), in natural units. The
// scores and PV kernels read the cache through a KvAccessStage (width 1) earlier in their chain.
#include <set>
#include <string>

#include "foundry/Stage.h"

namespace foundry {

/// Keys the P·V kernel takes a pass of its loop: one invocation covers the call's keys in kv_len / this
/// many passes (DeviceInfo::loopLimit; SdpaReferenceStep refuses lengths beyond).
inline constexpr std::uint32_t kReferencePvKeysPerPass = 8;

struct ReferenceParams {
  std::uint32_t headDim = 128;
  std::uint32_t valueDim = 128;  ///< of v and o
  DType dtype = DType::F16;      ///< of K and V (reached through the chain's KvAccessStage)
  DType qType = DType::F16;
  DType oType = DType::F16;
  std::uint32_t workgroup = 64;  ///< a power of two; the softmax reduces over it
};

class ReferenceScoresStage : public Stage {
 public:
  /// The hook points each kernel hosts.
  static std::set<std::string> hookPoints();
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
  static std::set<std::string> hookPoints();
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
  static std::set<std::string> hookPoints();
  explicit ReferencePvStage(ReferenceParams p) : p_(p) {}
  std::string name() const override { return "ReferencePvStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

 private:
  ReferenceParams p_;
};

}  // namespace foundry
