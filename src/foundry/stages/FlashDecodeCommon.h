#pragma once
// What FlashDecodeStage and FlashDecodeFusedStage share: the declarations and the body of a decode
// kernel after q is in shared memory. The two stages differ only in where q_shared comes from.
#include <set>
#include <string>

#include "foundry/GlslWriter.h"
#include "foundry/KernelInterface.h"
#include "foundry/stages/DecodeVariant.h"

namespace foundry {

struct DeviceInfo;

namespace decode_detail {

/// Buffer view of K/V for a vector width: "f16vec4", "vec2", "float16_t", ...
std::string kvView(DType dtype, std::uint32_t vecWidth);
/// Macros that convert and clamp a float for a dtype's storage.
void declareOutputMacros(KernelInterface& k, DType dtype, const std::string& prefix);

/// The hook points a decode kernel of this variant hosts: all but the tile hint, or the key loop's
/// only when a reduce kernel merges its Split-K partials.
std::set<std::string> hookPoints(const DecodeVariant& v);
/// Declares everything but q_shared's producer.
void declareBody(const DecodeVariant& v, KernelInterface& k, const DeviceInfo& device);
/// Emits the key loop, the merge and the store (final output or Split-K partials).
void emitBody(const DecodeVariant& v, GlslWriter& w);

}  // namespace decode_detail
}  // namespace foundry
