#include "foundry/steps/SdpaReferenceStep.h"

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/KvAccessStage.h"
#include "foundry/stages/ReferenceStages.h"

namespace foundry {

namespace {
constexpr std::uint32_t kReferenceWorkgroup = 64;
}

SdpaReferenceStep::SdpaReferenceStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets)
    : device_(device), snippets_(std::move(snippets)) {}

std::uint64_t SdpaReferenceStep::scratchBytes(const AttentionProblem& p) {
  return std::uint64_t(p.batch) * p.nHeads * p.qLen * p.kvLen * 4;
}

AttentionProblem SdpaReferenceStep::validate(const AttentionCall& call) const {
  const AttentionProblem p = describeCall(call);
  if (call.rope) throw UserError("rope", "SdpaReferenceStep takes rotated queries; apply RopeStep first");
  if (call.lse) {
    throw UnsupportedError("SdpaReferenceStep writes the output only; FlashAttentionStep returns the log-sum-exp (lse)");
  }
  requireStorage(p.qType(), device_, "q");
  requireStorage(p.dtype, device_, "k");
  requireStorage(p.oType(), device_, "o");
  const std::uint64_t bytes = scratchBytes(p);
  if (bytes > device_.maxStorageBufferRange) {
    throw UnsupportedError(fmt::format("the materialised scores of {} need {} bytes; device '{}' binds at most {} per "
                                       "buffer. Use FlashAttentionStep, which needs no such scratch",
                                       p.describe(), bytes, device_.name, device_.maxStorageBufferRange));
  }
  // One P·V invocation runs over every key (its loop of kv_len / kReferencePvKeysPerPass passes and the
  // tail's); the softmax's and the scores' loops are shorter. Past its loop limit a device would drop
  // the rest silently.
  const std::uint64_t tail = loopRunPasses(kReferencePvKeysPerPass) + loopRunPasses(0);
  const std::uint64_t budget = device_.loopPassBudget();
  const std::uint64_t mostKeys = budget > tail ? (budget - tail) * kReferencePvKeysPerPass : 0;
  if (device_.loopLimit != 0 && p.kvLen > mostKeys) {
    throw UnsupportedError(fmt::format("SdpaReferenceStep's P·V kernel runs over kv_len {} in one invocation; device '{}' "
                                       "ends a shader invocation's loops after {} passes (llvmpipe's loop limit), so "
                                       "this step takes at most {} keys here. Use FlashAttentionStep, which splits the "
                                       "keys",
                                       p.kvLen, device_.name, device_.loopLimit, mostKeys));
  }
  if (p.qLen > 65535 || std::uint64_t(p.batch) * p.nHeads > 65535) {
    throw UnsupportedError(fmt::format("SdpaReferenceStep grids are limited to 65535 tokens and batch*heads: {}",
                                       p.describe()));
  }
  return p;
}

const SdpaReferenceStep::Kernels& SdpaReferenceStep::kernels(const AttentionProblem& p) {
  const ReferenceParams params{p.headDim, p.vDim(), p.dtype, p.qType(), p.oType(), std::max(kReferenceWorkgroup, device_.subgroupSize)};
  const Modifiers mods = p.activeModifiers();
  std::set<std::string> hosted = ReferenceScoresStage::hookPoints();
  hosted.merge(ReferenceSoftmaxStage::hookPoints());
  hosted.merge(ReferencePvStage::hookPoints());
  requireHosted(mods, hosted, device_, "reference");
  Kernels k;
  k.scoresMods = modifiersFor(mods, ReferenceScoresStage::hookPoints(), device_);
  k.softmaxMods = modifiersFor(mods, ReferenceSoftmaxStage::hookPoints(), device_);
  k.pvMods = modifiersFor(mods, ReferencePvStage::hookPoints(), device_);
  const KvAccess access{p.dtype, 1, false, p.pageSize};
  const std::string key =
      fmt::format("{}_{}_{}_{}_{}{}{}{}{}", p.headDim, p.vDim(), dtypeName(p.qType()), dtypeName(p.dtype),
                  dtypeName(p.oType()), access.key(), k.scoresMods.key(device_), k.softmaxMods.key(device_),
                  k.pvMods.key(device_));
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  auto build = [&](const KernelModifiers& m, StagePtr stage, bool readsCache = true) {
    KernelBuilder b(device_, snippets_);
    b.workgroup(params.workgroup);
    if (readsCache) b.emplace<KvAccessStage>(access);
    m.addTo(b);
    return std::make_shared<const KernelSource>(b.add(std::move(stage)).build());
  };
  k.scores = build(k.scoresMods, std::make_shared<ReferenceScoresStage>(params));
  k.softmax = build(k.softmaxMods, std::make_shared<ReferenceSoftmaxStage>(params), false);
  k.pv = build(k.pvMods, std::make_shared<ReferencePvStage>(params));
  return cache_.emplace(key, std::move(k)).first->second;
}

std::vector<KernelSource> SdpaReferenceStep::kernelsFor(const AttentionCall& call) {
  const auto& k = kernels(validate(call));
  return {*k.scores, *k.softmax, *k.pv};
}

StepRecord SdpaReferenceStep::run(StepContext& ctx, const AttentionCall& call) {
  const AttentionProblem p = validate(call);
  const auto& k = kernels(p);
  const std::uint32_t wg = std::max(kReferenceWorkgroup, device_.subgroupSize);
  const Tensor scores = ctx.workspace.scratch("reference_scores", DType::F32, {p.batch, p.nHeads, p.qLen, p.kvLen});
  const ModifierCall mcall = p.modifierCall();
  Arguments base;
  setShapeArguments(base, p, call);
  Arguments a = base;
  a.bind("q", call.q).bind("scores", scores);
  bindCaches(a, call);
  a.set("scale", p.softmaxScale());
  k.scoresMods.bind(a, mcall, ctx.workspace, TileShape{});
  ctx.dispatcher.dispatch(*k.scores, a, {(p.kvLen + wg - 1) / wg, p.qLen, p.batch * p.nHeads});
  Arguments s = base;
  s.bind("scores", scores);
  k.softmaxMods.bind(s, mcall, ctx.workspace, TileShape{});
  ctx.dispatcher.dispatch(*k.softmax, s, {p.qLen, p.nHeads, p.batch});
  Arguments v = base;
  v.bind("scores", scores).bind("o", call.o);
  bindCaches(v, call);
  k.pvMods.bind(v, mcall, ctx.workspace, TileShape{});
  ctx.dispatcher.dispatch(*k.pv, v, {(p.vDim() + wg - 1) / wg, p.qLen, p.batch * p.nHeads});
  StepRecord r;
  for (const auto& m : p.activeModifiers()) r.modifiers.push_back(m->describe());
  r.plan.decisions.push_back({"path", "materialised", "SdpaReferenceStep was chosen explicitly"});
  r.plan.scratchBytes = scratchBytes(p);
  r.kernels = {k.scores->name, k.softmax->name, k.pv->name};
  return r;
}

}  // namespace foundry
