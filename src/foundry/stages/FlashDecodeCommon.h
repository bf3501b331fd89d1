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


/// The hook points a decode kernel of this variant hosts: all but the tile hint, or the key loop's
/// only when a reduce kernel merges its Split-K partials.
std::set<std::string> hookPoints(const DecodeVariant& v);
/// Declares everything but q_shared's producer and the KV access (the chain's KvAccessStage,
/// variant.kvAccess()).
void declareBody(const DecodeVariant& v, KernelInterface& k, const DeviceInfo& device);
/// Emits the key loop, the merge and the store (final output or Split-K partials).
void emitBody(const DecodeVariant& v, GlslWriter& w);

}  // namespace decode_detail
}  // namespace foundry
