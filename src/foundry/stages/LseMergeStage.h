#pragma once
// Merges several attention results over disjoint key sets into one, each weighed by its log-sum-exp:
// O = sum_i exp(lse_i - lse) O_i with lse = log sum_i exp(lse_i), per (batch, query head, token) row.
// The building block of cascade attention and of one sequence's keys split across devices. A part
// whose row saw no key (lse -inf) weighs nothing; a row no part saw gives 0 and lse -inf.
// Grid: (q_len, query heads, batch); the workgroup's invocations take the row's value dimensions.
#include "foundry/Stage.h"

namespace foundry {

struct LseMergeParams {
  std::uint32_t parts = 2;      ///< results merged by one kernel
  std::uint32_t valueDim = 128;
  DType partDtype = DType::F16; ///< of every part's output
  DType outDtype = DType::F16;  ///< of the merged output
  bool lse = false;             ///< also write the merged log-sum-exp
};

class LseMergeStage : public Stage {
 public:
  explicit LseMergeStage(LseMergeParams params) : p_(params) {}
  std::string name() const override { return "LseMergeStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

  /// The buffer names of part i: its output and its log-sum-exp.
  static std::string partOutput(std::uint32_t i);
  static std::string partLse(std::uint32_t i);

 private:
  LseMergeParams p_;
};

}  // namespace foundry
