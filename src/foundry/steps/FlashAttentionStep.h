#pragma once
// Fused attention for decode (q_len 1, optionally with RoPE fused in) and prefill (q_len > 1), with
// GQA/MQA, batch >= 1 and the causal offset kv_len - q_len. validate() fails fast, before anything
// is recorded; the step never falls back to the materialised path (SdpaReferenceStep), it says so.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <set>
#include <string>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/steps/AttentionCall.h"
#include "foundry/steps/AttentionOptions.h"
#include "foundry/steps/ModifierKernels.h"
#include "foundry/steps/Selector.h"
#include "foundry/steps/StepContext.h"

namespace foundry {

/// What a recorded call used, for reports.
struct StepRecord {
  AttentionPlan plan;
  std::vector<std::string> kernels;    ///< in the order recorded (modifier passes first)
  std::vector<std::string> modifiers;  ///< each active modifier's description
};

/// One kernel of a prepared call, with the modifiers it was built with and the hook points it hosts.
struct PreparedKernel {
  std::shared_ptr<const KernelSource> source;
  KernelModifiers modifiers;
  std::set<std::string> points;
};

/// A call's shapes planned once: the problem, the Selector's plan and every kernel it records, built
/// (FlashAttentionStep::prepare). It records any call that describes the same problem with the same
/// modifier objects — new Q, K, V and O tensors, a new RoPE position — without planning or building
/// again.
struct PreparedAttention {
  AttentionProblem problem;
  AttentionPlan variant;  ///< Selector::variant: what holds for every KV length of these shapes
  AttentionPlan plan;     ///< the variant fitted to the prepared call's KV length
  std::string rope;  ///< the fused RoPE the kernels were built with ("" for none)
  std::vector<PreparedKernel> kernels;  ///< the attention kernel, then the Split-K reduce if any

  std::vector<std::string> kernelNames() const;
  /// What a call must share with this plan to be recorded with it: every shape (the cache's capacity,
  /// not the KV length), dtype, layout, mask, scale and fused RoPE, and the modifier objects.
  static std::string shapeKey(const AttentionProblem& problem, const std::string& rope);
  /// The attention kernel (and with it the Split-K reduce) a plan records.
  static std::string kernelsKey(const AttentionPlan& plan);
  /// What of a fused RoPE changes the kernels: its rotary dims and pairing ("" without RoPE).
  static std::string ropeKey(const AttentionCall& call, std::uint32_t headDim);
};

class FlashAttentionStep {
 public:
  FlashAttentionStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets, AttentionOptions options);

  /// Checks the call; throws UserError / UnsupportedError naming the field. Records nothing.
  AttentionProblem validate(const AttentionCall& call) const;
  /// validate() then the Selector's plan.
  AttentionPlan plan(const AttentionCall& call) const;
  /// Validates, plans, builds (once per variant) and records the kernels: prepare() then run(prepared).
  StepRecord run(StepContext& ctx, const AttentionCall& call);
  /// Validates the call, asks the Selector and builds every kernel the plan records (the Split-K
  /// reduce included): all of run() but the recording.
  std::shared_ptr<const PreparedAttention> prepare(const AttentionCall& call);
  /// Records a call with a prepared plan. The call is validated (its tensors against each other) and
  /// must have the prepared call's shapeKey(); otherwise a UserError names both. Its KV length may
  /// differ: the prepared variant is fitted to it (Selector::fit), and a length that takes other
  /// kernels (a Split-K part, wider loads) builds them once.
  StepRecord run(StepContext& ctx, const PreparedAttention& prepared, const AttentionCall& call);

  /// The kernels this step would build for a call, without recording (foundry kernels --dump).
  std::vector<KernelSource> kernelsFor(const AttentionCall& call);

  /// The workspace tensor a probed prefill plan (FOUNDRY_FA_PREFILL_PROBE) writes its records into
  /// (stages/PrefillProbe.h): one per subgroup of its grid. The same tensor run() binds.
  static Tensor probeRecords(Workspace& workspace, const AttentionPlan& plan);

  /// Whether the call runs as a prefill of its GQA groups (Selector::decodeAsGroupRows), whose kernels
  /// take no fused RoPE: a caller with RoPE to fuse rotates q apart instead.
  /// (The decision alone: the grouped call is not built.)
  bool takesGroupRows(const AttentionCall& call) const;

 private:
  /// A call as the kernels take it, validated once: the call as a prefill of its GQA groups where the
  /// Selector takes it so (decodeAsGroupRows), and the problem of what runs.
  struct Routed {
    std::optional<AttentionCall> grouped;
    AttentionProblem problem;
    const AttentionCall& call(const AttentionCall& original) const { return grouped ? *grouped : original; }
  };
  Routed route(const AttentionCall& call) const;
  /// The plan of a routed call; a grouped one's first decision says why it runs as a prefill.
  AttentionPlan planRouted(const Routed& r) const;
  /// That first decision, for a plan made from a grouped call's problem.
  void noteGroupRows(AttentionPlan& plan, const AttentionProblem& grouped) const;
  std::shared_ptr<const KernelSource> kernel(const std::string& key, const std::function<KernelSource()>& build);
  std::vector<PreparedKernel> buildKernels(const AttentionProblem& p, const AttentionPlan& plan, bool fusedRope,
                                  const RopeSpec* rope);
  void compareOnline(StepContext& ctx, const AttentionCall& call, const AttentionProblem& p);

  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  AttentionOptions options_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const KernelSource>> kernels_;
  std::set<std::string> compared_;
};

}  // namespace foundry
