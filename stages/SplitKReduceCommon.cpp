#include "stages/SplitKReduceCommon.h"

#include "stages/FlashDecodeCommon.h"
#include "stages/HeadLayoutStage.h"

namespace foundry::splitk_detail {

void declareReduce(KernelInterface& k, std::uint32_t headDim, DType dtype) {
  k.buffer("partial_o", DType::F32, Access::ReadOnly).buffer("partial_ml", DType::F32, Access::ReadOnly, "vec2");
  k.buffer("o", dtype, Access::WriteOnly);
  HeadLayoutStage::declareShapeFields(k);
  k.push("n_splits", PushType::U32);
  k.constant("HEAD_DIM", headDim);
  decode_detail::declareOutputMacros(k, dtype, "OUT");
  k.snippet("flashattention/splitk_reduce.glsl");
}

}  // namespace foundry::splitk_detail
