#include "foundry/stages/FlashDecodeFusedStage.h"

#include <fmt/format.h>

#include "foundry/stages/FlashDecodeCommon.h"

namespace foundry {

void FlashDecodeFusedStage::declare(KernelInterface& k, const DeviceInfo& device) const {
  k.consumes("q_shared", fmt::format("shared float[{}]", v_.heads * v_.headDim));
  decode_detail::declareBody(v_, k, device);
}

void FlashDecodeFusedStage::emit(GlslWriter& w, const DeviceInfo&) const {
  if (v_.probe) w.line("probe_begin();");  // after the RoPE stage has staged q
  decode_detail::emitBody(v_, w);
}

}  // namespace foundry
