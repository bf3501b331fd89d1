#pragma once
// Merges partial attention results — each the attention of the same queries over its own keys, with
// the log-sum-exp FlashAttentionStep returns (AttentionCall::lse) — into the attention over all their
// keys: O = sum_i exp(lse_i - lse) O_i, lse = log sum_i exp(lse_i). Cascade attention (a shared prefix
// and each sequence's own suffix) and one sequence's keys spread over devices are built from it.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foundry/DeviceInfo.h"
#include "foundry/Dispatcher.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/steps/StepContext.h"

namespace foundry {

/// One partial result: its output and its log-sum-exp.
struct MergePart {
  Tensor o;    ///< [B, Hq, q_len, value_dim] head-major or [B, q_len, Hq, value_dim] token-major
  /// f32 [B, Hq, q_len] packed; -inf where the part's row saw no key. Values on the device are not
  /// checked: a part's +inf or NaN (a part computed wrongly) gives a merged row of no meaning.
  Tensor lse;
};

struct MergeCall {
  std::vector<MergePart> parts;  ///< one or more; the outputs share dims, dtype, layout and strides
  Tensor o;                      ///< the merged output: the parts' dims in its own layout, f16, bf16 or f32
  std::optional<Tensor> lse;     ///< the merged log-sum-exp, f32 [B, Hq, q_len] packed
};

/// The shape a merge call describes.
struct MergeProblem {
  std::uint32_t batch = 1, nHeads = 1, qLen = 1, valueDim = 1;
  std::uint32_t parts = 1;
  DType partDtype = DType::F16, outDtype = DType::F16;
  bool lse = false;
};

/// What a merge recorded: each kernel and its grid, in order.
struct MergeRecord {
  std::vector<std::string> kernels;
  std::vector<Grid> grids;
};

class MergeStep {
 public:
  /// Parts one kernel reads (two buffers each, with the output's two: 18 storage buffers in one
  /// stage). More parts merge in a tree: groups of at most this many into f32 scratch, then those.
  static constexpr std::uint32_t kPartsPerKernel = 8;

  MergeStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

  /// Checks the call; throws UserError / UnsupportedError naming the field. Records nothing.
  MergeProblem validate(const MergeCall& call) const;
  /// Validates and records the merge kernels.
  MergeRecord run(StepContext& ctx, const MergeCall& call);
  /// The kernels a call builds, without recording.
  std::vector<KernelSource> kernelsFor(const MergeCall& call);

 private:
  /// The kernel merging `parts` parts of `partDtype` into `outDtype`.
  const KernelSource& kernel(const MergeProblem& p, std::uint32_t parts, DType partDtype, DType outDtype, bool lse);
  /// Records the merge of `parts` (all of one dtype and strides) into `o` and, if set, `lse`: one
  /// kernel, or a level of groups into scratch and the merge of those.
  void record(StepContext& ctx, const MergeProblem& p, const std::vector<MergePart>& parts, const Tensor& o,
              const std::optional<Tensor>& lse, std::uint32_t level, MergeRecord& out);

  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  std::map<std::string, std::shared_ptr<const KernelSource>> cache_;
};

}  // namespace foundry
