#include "foundry/stages/SplitKReduceCommon.h"

#include "foundry/StorageFormat.h"
#include "foundry/stages/AttentionHooks.h"
#include "foundry/stages/FlashDecodeCommon.h"
#include "foundry/stages/HeadLayoutStage.h"
#include "foundry/stages/LseOutput.h"

namespace foundry::splitk_detail {

std::set<std::string> hookPoints() { return attentionHookNames(HookPhase::Output); }

void declareReduce(KernelInterface& k, std::uint32_t valueDim, DType dtype, bool lse) {
  k.buffer("partial_o", DType::F32, Access::ReadOnly).buffer("partial_ml", DType::F32, Access::ReadOnly, "vec2");
  k.buffer("o", dtype, Access::WriteOnly);
  if (lse) lse_detail::declare(k);
  HeadLayoutStage::declareShapeFields(k);
  k.push("n_splits", PushType::U32);
  k.constant("VALUE_DIM", valueDim);
  glsl::declareWrite(k, "OUT_STORE", dtype);
  k.snippet("flashattention/splitk_reduce.glsl");
  // The partials' merge is where the output's hooks (sinks, epilogue) run.
  hostAttentionHooks(k, hookPoints());
}

}  // namespace foundry::splitk_detail
