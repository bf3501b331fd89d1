#pragma once
// The attention API a C++ program holds. A call (foundry/steps/AttentionCall.h) names its tensors and
// its modifiers — the built-in ones and the program's own stages with their own GLSL (a file or a
// string, foundry/GlslSource.h). FusedAttention plans each distinct shape once — the checks, the
// Selector's variant, every kernel of the chain built and compiled (head layout, fused RoPE, the
// modifiers at their hook points, decode or prefill, the Split-K reduce where the plan splits) — and
// then records and runs calls of that shape as often as asked, with no Selector, no kernel building
// and no push-constant bookkeeping on the program's side.
//
// One FusedAttention serves one thread at a time (docs/embedding.md).
#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "foundry/Dispatcher.h"
#include "foundry/Workspace.h"
#include "foundry/steps/AttentionCall.h"
#include "foundry/steps/AttentionOptions.h"
#include "foundry/steps/FlashAttentionStep.h"

namespace foundry {

class Runtime;

/// What run() did: the kernels recorded (with the plan behind them) and each dispatch's GPU time.
struct AttentionRun {
  StepRecord record;
  SubmitResult timings;
};

class FusedAttention {
 public:
  /// Attention on `runtime`'s device, with `options`' knobs (default: nothing forced; a field set
  /// outside its knob's values is a UserError naming the knob). Holds `runtime` by reference: destroy
  /// this object before it.
  explicit FusedAttention(Runtime& runtime, AttentionOptions options = {});

  /// Plans the call's shapes, once: checks the call (a UserError or UnsupportedError names the field),
  /// asks the Selector, builds every kernel and creates its pipeline, so running it compiles nothing.
  /// A later call of the same shapes (PreparedAttention::shapeKey; any KV length) gets the same plan,
  /// fitted to its length when it runs (a length that takes other kernels builds them once).
  const PreparedAttention& plan(const AttentionCall& call);
  /// Records the call's dispatches into `dispatcher` (planning its shapes first if they are new), for a
  /// program that submits several steps together.
  StepRecord record(Dispatcher& dispatcher, const AttentionCall& call);
  /// Records the call on a dispatcher of its own (made at the first run and kept for the next ones),
  /// submits and waits.
  AttentionRun run(const AttentionCall& call);

  /// How many distinct shapes have been planned. Each keeps its plan (a few KiB of host memory) until
  /// forgetPlans(): a program that sees ever new shapes (a server sizing its caches per request) calls
  /// it now and then.
  std::size_t plans() const { return plans_.size(); }
  /// Drops every plan (their kernels and pipelines stay in the Runtime's caches, so planning a shape
  /// again compiles nothing). A reference plan() returned is not valid after it.
  void forgetPlans() { plans_.clear(); }
  FlashAttentionStep& step() { return step_; }
  /// The scratch (Split-K partials, a mask's block map) calls share; grows to the largest call.
  Workspace& workspace() { return workspace_; }

 private:
  Runtime& runtime_;
  FlashAttentionStep step_;
  DeviceWorkspace workspace_;
  std::map<std::string, std::shared_ptr<const PreparedAttention>> plans_;
  std::unique_ptr<Dispatcher> dispatcher_;  ///< run()'s, kept so that a call creates no Vulkan pools
};

}  // namespace foundry
