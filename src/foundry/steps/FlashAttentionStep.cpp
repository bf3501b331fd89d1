#include "foundry/steps/FlashAttentionStep.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/Runtime.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/FlashDecodeCommon.h"
#include "foundry/stages/FlashDecodeFusedStage.h"
#include "foundry/stages/FlashDecodeSplitKReduceStage.h"
#include "foundry/stages/FlashDecodeStage.h"
#include "foundry/stages/HeadLayoutStage.h"
#include "foundry/stages/KvAccessStage.h"
#include "foundry/stages/PrefillProbe.h"
#include "foundry/stages/RopeStage.h"
#include "foundry/stages/SdpaPrefillCommon.h"
#include "foundry/stages/SdpaPrefillSplitKPartStage.h"
#include "foundry/stages/SdpaPrefillSplitKReduceStage.h"
#include "foundry/stages/SdpaPrefillStage.h"
#include "foundry/stages/SplitKReduceCommon.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/SdpaReferenceStep.h"
#include "foundry/steps/TuningTable.h"

namespace foundry {

FlashAttentionStep::FlashAttentionStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets,
                                       AttentionOptions options)
    : device_(device), snippets_(std::move(snippets)), options_(std::move(options)) {
  options_.validate();
}

AttentionProblem FlashAttentionStep::validate(const AttentionCall& call) const {
  if (options_.disableFa || options_.sdpaForceMaterialized) {
    throw UnsupportedError(fmt::format(
        "FlashAttentionStep is disabled by {}=1; the materialised path is never chosen silently: use "
        "SdpaReferenceStep explicitly, or unset the variable",
        options_.disableFa ? "FOUNDRY_DISABLE_FA" : "FOUNDRY_SDPA_FORCE_MATERIALIZED"));
  }
  const AttentionProblem p = describeCall(call);
  requireStorage(p.qType(), device_, "q");
  requireStorage(p.dtype, device_, "k");
  requireStorage(p.oType(), device_, "o");
  if (call.rope) {
    const auto& r = call.rope->spec;
    r.validate(p.headDim);
    const std::uint32_t dims = r.dims(p.headDim);
    if (call.rope->invFreq.numel() != dims / 2 || call.rope->invFreq.dtype != DType::F32) {
      throw UserError("rope.inv_freq", fmt::format("expected {} f32 values, got {}", dims / 2,
                                                   call.rope->invFreq.shapeString()));
    }
  }
  return p;
}

bool FlashAttentionStep::takesGroupRows(const AttentionCall& call) const {
  return Selector::decodeAsGroupRows(validate(call), call.rope.has_value(), device_, options_);
}

FlashAttentionStep::Routed FlashAttentionStep::route(const AttentionCall& call) const {
  const AttentionProblem p = validate(call);
  if (!Selector::decodeAsGroupRows(p, call.rope.has_value(), device_, options_)) return {std::nullopt, p};
  AttentionCall grouped = groupRowsCall(call, p.group());
  const AttentionProblem g = validate(grouped);
  const AttentionProblem want = Selector::groupRowsProblem(p);
  FOUNDRY_CHECK_INTERNAL(g.nHeads == want.nHeads && g.qLen == want.qLen && !g.causal,
                         "the grouped call's tensors disagree with Selector::groupRowsProblem");
  return {std::move(grouped), g};
}

void FlashAttentionStep::noteGroupRows(AttentionPlan& plan, const AttentionProblem& grouped) const {
  plan.decisions.insert(
      plan.decisions.begin(),
      {"decode", fmt::format("as a prefill of {} rows (the GQA group) per KV head", grouped.qLen),
       options_.faDecodeGroupRows == Force::On
           ? std::string("FOUNDRY_FA_DECODE_GROUP_ROWS")
           : tuningFor(device_, grouped.headDim, grouped.dtype).sourceOf("decodeGroupRows")});
}

AttentionPlan FlashAttentionStep::planRouted(const Routed& r) const {
  AttentionPlan plan = Selector::plan(r.problem, device_, options_);
  if (r.grouped) noteGroupRows(plan, r.problem);
  return plan;
}

AttentionPlan FlashAttentionStep::plan(const AttentionCall& call) const { return planRouted(route(call)); }

std::shared_ptr<const KernelSource> FlashAttentionStep::kernel(const std::string& key,
                                                               const std::function<KernelSource()>& build) {
  std::lock_guard lock(mutex_);
  auto it = kernels_.find(key);
  if (it == kernels_.end()) it = kernels_.emplace(key, std::make_shared<const KernelSource>(build())).first;
  return it->second;
}

std::vector<PreparedKernel> FlashAttentionStep::buildKernels(const AttentionProblem& p,
                                                                       const AttentionPlan& plan, bool fusedRope,
                                                                       const RopeSpec* rope) {
  const std::uint32_t sg = device_.subgroupSize;
  const Modifiers mods = p.activeModifiers();
  std::vector<PreparedKernel> out;
  auto notes = [&](KernelBuilder& b) {
    for (const auto& d : plan.decisions) b.note(d.what, fmt::format("{} ({})", d.value, d.reason));
  };
  // The reduce kernel merges Split-K partials and runs the output's hooks.
  auto reduce = [&](const std::string& what, auto stage) {
    const std::set<std::string> points = splitk_detail::hookPoints();
    KernelModifiers rm = modifiersFor(mods, points, device_);
    auto source = kernel(fmt::format("{}_reduce_D{}_{}{}{}", what, p.vDim(), dtypeName(p.oType()), p.lse ? "_lse" : "",
                                     rm.key(device_)), [&] {
      KernelBuilder b(device_, snippets_);
      b.workgroup(plan.reduceWorkgroup);
      rm.addTo(b);
      b.add(stage);
      return b.build();
    });
    out.push_back({std::move(source), std::move(rm), points});
  };
  // Each kernel takes the hooks it hosts; a hook that none of them hosts is refused before building.
  std::set<std::string> hosted = plan.decode ? decode_detail::hookPoints(plan.decodeVariant)
                                             : prefill_detail::hookPoints(plan.prefillVariant);
  if (plan.reduceKernel()) hosted.merge(splitk_detail::hookPoints());
  requireHosted(mods, hosted, device_,
                plan.decode ? "decode_" + plan.decodeVariant.key() : "prefill_" + plan.prefillVariant.key());
  if (plan.decode) {
    const DecodeVariant& v = plan.decodeVariant;
    const std::set<std::string> points = decode_detail::hookPoints(v);
    KernelModifiers km = modifiersFor(mods, points, device_);
    std::string key = "decode_" + v.key();
    RopeStageParams rp;
    if (fusedRope) {
      rp = {p.headDim, rope->dims(p.headDim), rope->pairing == RopePairing::Interleaved, p.qType(), v.heads};
      key += fmt::format("_rope{}_{}", rp.rotaryDims, rp.interleaved);
    }
    auto source = kernel(key + km.key(device_), [&] {
      KernelBuilder b(device_, snippets_);
      b.workgroup(v.workgroupSize(sg)).emplace<HeadLayoutStage>(HeadLayoutStage::Grid::Decode, v.heads);
      b.emplace<KvAccessStage>(v.kvAccess());
      km.addTo(b);
      if (fusedRope) {
        b.emplace<RopeStage>(RopeStage::Mode::SharedQuery, rp).emplace<FlashDecodeFusedStage>(v);
      } else {
        b.emplace<FlashDecodeStage>(v);
      }
      notes(b);
      return b.build();
    });
    out.push_back({std::move(source), std::move(km), points});
    if (plan.reduceKernel()) reduce("decode", std::make_shared<FlashDecodeSplitKReduceStage>(p.vDim(), p.oType(), p.lse));
    return out;
  }
  const PrefillVariant& v = plan.prefillVariant;
  const std::set<std::string> points = prefill_detail::hookPoints(v);
  KernelModifiers km = modifiersFor(mods, points, device_);
  auto source = kernel("prefill_" + v.key() + km.key(device_), [&] {
    KernelBuilder b(device_, snippets_);
    b.workgroup(v.workgroupSize(sg)).emplace<HeadLayoutStage>(
        v.headsFirst ? HeadLayoutStage::Grid::PrefillHeadsFirst : HeadLayoutStage::Grid::Prefill, 1);
    b.emplace<KvAccessStage>(v.kvAccess());
    km.addTo(b);
    if (v.split) b.emplace<SdpaPrefillSplitKPartStage>(v);
    else b.emplace<SdpaPrefillStage>(v);
    notes(b);
    return b.build();
  });
  out.push_back({std::move(source), std::move(km), points});
  if (v.split) reduce("prefill", std::make_shared<SdpaPrefillSplitKReduceStage>(p.headDim, p.oType(), p.lse));
  return out;
}

std::vector<KernelSource> FlashAttentionStep::kernelsFor(const AttentionCall& original) {
  const Routed routed = route(original);
  const AttentionCall& call = routed.call(original);
  const AttentionProblem& p = routed.problem;
  const AttentionPlan plan = planRouted(routed);
  std::vector<KernelSource> out;
  for (const auto& k : buildKernels(p, plan, call.rope.has_value(), call.rope ? &call.rope->spec : nullptr)) {
    out.push_back(*k.source);
  }
  return out;
}

Tensor FlashAttentionStep::probeRecords(Workspace& workspace, const AttentionPlan& plan) {
  FOUNDRY_CHECK_INTERNAL(plan.probed(), "probe records of a plan without the probe");
  const std::uint64_t groups = std::uint64_t(plan.grid.x) * plan.grid.y * plan.grid.z;
  return workspace.scratch(probe::kTensor, DType::U32,
                           {static_cast<std::int64_t>(probe::words(groups, plan.probeSubgroups()))});
}

std::vector<std::string> PreparedAttention::kernelNames() const {
  std::vector<std::string> out;
  for (const auto& k : kernels) out.push_back(k.source->name);
  return out;
}

std::string PreparedAttention::ropeKey(const AttentionCall& call, std::uint32_t headDim) {
  if (!call.rope) return {};
  const RopeSpec& r = call.rope->spec;
  return fmt::format("rope r{} {}", r.dims(headDim), ropePairingName(r.pairing));
}

std::string PreparedAttention::kernelsKey(const AttentionPlan& plan) {
  return plan.decode ? "decode_" + plan.decodeVariant.key() : "prefill_" + plan.prefillVariant.key();
}

std::string PreparedAttention::shapeKey(const AttentionProblem& p, const std::string& rope) {
  // Not the KV length: a plan is fitted to each call's (Selector::fit).
  std::string key = fmt::format("q {} kv {} o {} {} {} B{} Hq{} Hkv{} q{} capacity{} D{} Dv{} row{} align{}/{} causal{} "
                                "scale{} pages{} lse{}", dtypeName(p.qType()), dtypeName(p.dtype), dtypeName(p.oType()),
                                layoutName(p.qLayout), layoutName(p.oLayout), p.batch, p.nHeads, p.nKvHeads, p.qLen,
                                p.kvCapacity, p.headDim, p.vDim(), p.vRow(), p.kvAlign, p.qAlign, p.causal, p.scale,
                                p.pageSize, p.lse);
  if (!rope.empty()) key += " " + rope;
  // The modifier objects themselves: the Selector sizes Split-K by their key ranges, which their values
  // (a window's width, a prefix's length) decide.
  for (const auto& m : p.modifiers) key += fmt::format(" +{}[{}]@{}", m->name(), m->key(), fmt::ptr(m.get()));
  return key;
}

std::shared_ptr<const PreparedAttention> FlashAttentionStep::prepare(const AttentionCall& original) {
  const Routed routed = route(original);
  const AttentionCall& call = routed.call(original);
  auto prepared = std::make_shared<PreparedAttention>();
  prepared->problem = routed.problem;
  prepared->variant = Selector::variant(prepared->problem, device_, options_);
  if (routed.grouped) noteGroupRows(prepared->variant, prepared->problem);
  prepared->plan = Selector::fit(prepared->variant, prepared->problem, device_, options_);
  prepared->rope = PreparedAttention::ropeKey(call, prepared->problem.headDim);
  prepared->kernels = buildKernels(prepared->problem, prepared->plan, call.rope.has_value(),
                                   call.rope ? &call.rope->spec : nullptr);
  return prepared;
}

StepRecord FlashAttentionStep::run(StepContext& ctx, const AttentionCall& call) { return run(ctx, *prepare(call), call); }

StepRecord FlashAttentionStep::run(StepContext& ctx, const PreparedAttention& prepared, const AttentionCall& original) {
  const Routed routed = route(original);
  const AttentionCall& call = routed.call(original);
  const AttentionProblem& p = routed.problem;
  const std::string want = PreparedAttention::shapeKey(prepared.problem, prepared.rope);
  const std::string got = PreparedAttention::shapeKey(p, PreparedAttention::ropeKey(call, p.headDim));
  if (got != want) {
    throw UserError("call", fmt::format("the call is {} but the plan was made for {}; plan the call's own shapes "
                                        "(FlashAttentionStep::prepare)", got, want));
  }
  StepRecord record;
  // The prepared plan fitted to this call's KV length; where the length takes other kernels (a split,
  // wider loads), they are built once (the step's kernel map) and recorded instead.
  record.plan = p.kvLen == prepared.problem.kvLen ? prepared.plan : Selector::fit(prepared.variant, p, device_, options_);
  const AttentionPlan& plan = record.plan;
  std::vector<PreparedKernel> refitted;
  if (PreparedAttention::kernelsKey(plan) != PreparedAttention::kernelsKey(prepared.plan)) {
    refitted = buildKernels(p, plan, call.rope.has_value(), call.rope ? &call.rope->spec : nullptr);
  }
  const auto& kernels = refitted.empty() ? prepared.kernels : refitted;
  // The call's own modifiers (their tensors and values), taken as the prepared kernels take theirs.
  const Modifiers mods = p.activeModifiers();
  std::vector<KernelModifiers> km;
  for (const auto& k : kernels) {
    km.push_back(modifiersFor(mods, k.points, device_));
    // The plan's key holds the modifier objects, so the call's are the ones its kernels were built with.
    FOUNDRY_CHECK_INTERNAL(km.back().modifiers == k.modifiers.modifiers, "the call's modifiers are not its plan's");
  }
  for (const auto& m : mods) record.modifiers.push_back(m->describe());
  if (options_.debugSdpa || options_.debugSdpaVerbose) {
    spdlog::info("attention {} on '{}': {}", p.describe(), device_.name, plan.describe());
  }
  const ModifierCall mcall = p.modifierCall();
  auto cached = [this](const std::string& key, const std::function<KernelSource()>& build) { return kernel(key, build); };
  for (auto& name : recordModifierPasses(ctx, km[0], mcall, plan.tile, cached, device_, snippets_)) {
    record.kernels.push_back(std::move(name));
  }
  Arguments args;
  setShapeArguments(args, p, call);
  bindCaches(args, call);
  args.set("qk_scale", static_cast<float>(p.softmaxScale() * std::numbers::log2e)).set("kv_chunk", plan.kvChunk);
  km[0].bind(args, mcall, ctx.workspace, plan.tile);
  const bool split = plan.splits > 1;
  Tensor partialO, partialMl;
  if (split) {
    partialO = ctx.workspace.scratch("splitk_partial_o", DType::F32, {p.batch, p.nHeads, p.qLen, plan.splits, p.vDim()});
    partialMl = ctx.workspace.scratch("splitk_partial_ml", DType::F32, {p.batch, p.nHeads, p.qLen, plan.splits, 2});
    args.bind("partial_o", partialO).bind("partial_ml", partialMl).set("n_splits", plan.splits);
  } else if (!plan.decode) {
    args.set("n_splits", 1u);
  }
  if (plan.probed()) args.bind("probe", probeRecords(ctx.workspace, plan));
  if (!plan.reduceKernel()) args.bind("o", call.o);
  if (call.lse && !plan.reduceKernel()) args.bind("lse", *call.lse);
  if (split && !plan.reduceKernel()) {
    // Zero when first made; the kernel's merging workgroups leave it zero.
    // The arrivals, then (claims) the claimed ends' counters, one of each per head group.
    std::vector<std::int64_t> counters = {plan.grid.z, plan.grid.y};
    const std::uint32_t sets = plan.decodeVariant.splitCounters();
    if (sets > 1) counters.insert(counters.begin(), sets);
    args.bind("split_arrivals", ctx.workspace.zeroed("splitk_arrivals", DType::F32, std::move(counters)));
  }
  if (call.rope) {
    args.bind("rope_inv_freq", call.rope->invFreq).set("rope_pos0", call.rope->position);
    args.set("rope_scale", static_cast<float>(call.rope->spec.attentionScale()));
  }
  args.bind("q", call.q);
  if (options_.debugSdpaVerbose) {
    spdlog::info("  {} grid {}x{}x{}, kv_chunk {}, splits {}", kernels[0].source->name, plan.grid.x, plan.grid.y,
                 plan.grid.z, plan.kvChunk, plan.splits);
  }
  ctx.dispatcher.dispatch(*kernels[0].source, args, plan.grid);
  record.kernels.push_back(kernels[0].source->name);
  if (plan.reduceKernel()) {
    Arguments reduce;
    setShapeArguments(reduce, p, call);
    reduce.bind("partial_o", partialO).bind("partial_ml", partialMl).bind("o", call.o).set("n_splits", plan.splits);
    if (call.lse) reduce.bind("lse", *call.lse);
    km[1].bind(reduce, mcall, ctx.workspace, TileShape{});
    ctx.dispatcher.dispatch(*kernels[1].source, reduce, plan.reduceGrid);
    record.kernels.push_back(kernels[1].source->name);
  }
  if (options_.sdpaDebugOnlineCompare) compareOnline(ctx, original, validate(original));
  return record;
}

void FlashAttentionStep::compareOnline(StepContext& ctx, const AttentionCall& call, const AttentionProblem& p) {
  const std::string key = p.describe();
  if (compared_.count(key)) return;
  compared_.insert(key);
  if (!ctx.runtime) {
    spdlog::warn("FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE: no device to compare on for {}", key);
    return;
  }
  Runtime& rt = *ctx.runtime;
  ctx.dispatcher.flush();  // the inputs (a decode token's q) and the flash output are only recorded yet
  AttentionCall ref = call;
  ref.rope.reset();
  ref.lse.reset();  // the reference path writes outputs only
  if (call.rope) {
    // The reference takes rotated queries: rotate a copy on the host.
    auto q = rt.download(call.q);
    std::vector<std::uint32_t> pos(q.size() / p.headDim, call.rope->position);
    cpuRope(call.rope->spec, p.headDim, q, pos);
    ref.q = rt.allocate(call.q);
    rt.upload(ref.q, q);
  }
  ref.o = rt.allocate(call.o);
  ref.o.name = "online_compare_reference";
  SdpaReferenceStep(device_, snippets_).run(ctx, ref);
  ctx.dispatcher.flush();
  const auto flash = rt.download(call.o);
  const auto want = rt.download(ref.o);
  const std::vector<double> wantD(want.begin(), want.end());
  const ErrorStats e = compareOutputs(flash, wantD);
  spdlog::info("online compare {}: flash vs reference max-abs {:.3g}, relative {:.3g}{}", key, e.maxAbs, e.maxRel,
               e.nonFinite ? fmt::format(", {} non-finite", e.nonFinite) : "");
}

}  // namespace foundry
