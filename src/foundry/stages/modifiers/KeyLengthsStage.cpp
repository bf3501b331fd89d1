#include "foundry/stages/modifiers/KeyLengthsStage.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/stages/AttentionHooks.h"

namespace foundry {

std::string KeyLengthsStage::describe() const {
  return fmt::format("per-sequence key lengths [{}]", fmt::join(lengths_, ", "));
}

void KeyLengthsStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.buffer("kv_lengths", DType::U32, Access::ReadOnly).snippet("modifiers/key_lengths.glsl");
  k.hook(hook::kKvLen, "key_lengths_kv_len");
}

void KeyLengthsStage::validate(const ModifierCall& call) const {
  if (tensor_.dtype != DType::U32 || tensor_.numel() != call.batch || !tensor_.packed()) {
    throw UserError("kv_lengths", fmt::format("expected a packed u32 tensor of {} lengths (one per sequence), got {}",
                                              call.batch, tensor_.shapeString()));
  }
  if (lengths_.size() != call.batch) {
    throw UserError("kv_lengths", fmt::format("the host copy holds {} lengths; the batch is {}", lengths_.size(),
                                              call.batch));
  }
  for (std::size_t b = 0; b < lengths_.size(); ++b) {
    if (lengths_[b] < call.qLen || lengths_[b] > call.kvLen) {
      throw UserError("kv_lengths", fmt::format("sequence {} has {} keys; each length must lie in [q_len {}, kv_len {}]",
                                                b, lengths_[b], call.qLen, call.kvLen));
    }
  }
}

void KeyLengthsStage::bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const {
  args.bind("kv_lengths", tensor_);
}

}  // namespace foundry
