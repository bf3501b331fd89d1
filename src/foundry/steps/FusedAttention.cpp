#include "foundry/steps/FusedAttention.h"

#include "foundry/Runtime.h"
#include "foundry/vk/PipelineCache.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

FusedAttention::FusedAttention(Runtime& runtime, AttentionOptions options)
    : runtime_(runtime), step_(runtime.info(), runtime.snippets(), std::move(options)), workspace_(runtime) {}

const PreparedAttention& FusedAttention::plan(const AttentionCall& call) {
  const AttentionProblem p = step_.validate(call);
  const std::string key = PreparedAttention::shapeKey(p, PreparedAttention::ropeKey(call, p.headDim));
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto prepared = step_.prepare(call);
    for (const auto& k : prepared->kernels) runtime_.pipelines().get(*k.source);
    it = plans_.emplace(key, std::move(prepared)).first;
  }
  return *it->second;
}

StepRecord FusedAttention::record(Dispatcher& dispatcher, const AttentionCall& call) {
  const PreparedAttention& prepared = plan(call);
  StepContext ctx{dispatcher, workspace_, &runtime_};
  return step_.run(ctx, prepared, call);
}

AttentionRun FusedAttention::run(const AttentionCall& call) {
  if (!dispatcher_) dispatcher_ = runtime_.dispatcher();
  AttentionRun out;
  try {
    out.record = record(*dispatcher_, call);
    out.timings = dispatcher_->submit();
  } catch (...) {
    dispatcher_.reset();  // whatever the failed call recorded is dropped with its dispatcher, never run later
    throw;
  }
  return out;
}

}  // namespace foundry
