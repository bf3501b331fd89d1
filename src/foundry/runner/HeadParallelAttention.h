#pragma once
// Head-parallel attention over MPI ranks: rank r owns one contiguous group of KV heads, every
// position of them, and the query heads that read them (GQA groups stay whole). Heads do not mix, so
// each rank's attention is complete on its own: no merge, only the outputs gathered on rank 0. Where
// context parallelism (ContextParallelDecode, RingPrefill) divides the positions and merges partials,
// this divides the heads: each rank reads 1/N of the cache per decode step and sends only its heads'
// outputs. The KV heads must divide evenly over the ranks.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foundry/Runtime.h"
#include "foundry/Workspace.h"
#include "foundry/runner/Communicator.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

class Buffer;

/// The heads a rank owns: KV heads [kvBegin, kvEnd) and query heads [qBegin, qEnd).
struct HeadGroup {
  std::uint32_t kvBegin = 0, kvEnd = 0, qBegin = 0, qEnd = 0;
  std::uint32_t kvHeads() const { return kvEnd - kvBegin; }
  std::uint32_t queryHeads() const { return qEnd - qBegin; }
};

/// What one rank did in a call.
struct HeadParallelTiming {
  double attentionMicros = 0;  ///< its heads' attention (GPU time)
  double gatherMicros = 0;     ///< wall time in the gather, waiting for the slowest rank included
  std::uint64_t bytesSent = 0; ///< its heads' outputs
};

struct HeadParallelReport {
  std::vector<HeadParallelTiming> ranks;  ///< every rank's, on every rank
  double copyMicros = 0;                  ///< rank 0: the gathered outputs into `whole` (wall time)
  std::map<std::string, std::uint64_t> kernels;  ///< this rank's: kernel -> dispatches
};

class HeadParallelAttention {
 public:
  /// `kvHeads` over `comm`'s ranks, `queryHeads` (a multiple of kvHeads) following them. UserError when
  /// the KV heads do not divide evenly over the ranks.
  HeadParallelAttention(Runtime& runtime, Communicator& comm, std::uint32_t queryHeads, std::uint32_t kvHeads,
                        AttentionOptions options);

  HeadGroup group(std::uint32_t rank) const;
  HeadGroup mine() const { return group(comm_.rank()); }

  /// This rank's heads of a tensor with every head: dim 1 of head-major [B, H, T, D] or dim 2 of
  /// token-major [B, T, H, D] narrowed to [begin, end), a view.
  static Tensor heads(Tensor t, std::uint32_t begin, std::uint32_t end);

  /// New tokens' K/V with every KV head (the same on every rank) into this rank's caches
  /// ([B, its KV heads, capacity, D]) at row `pos0`, RoPE at their positions when given.
  void append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache, std::uint32_t pos0,
              const std::optional<KvAppendStep::Rope>& rope = std::nullopt);

  /// The attention of this rank's heads: `call.q` its query heads, `call.k`/`call.v` its caches, and
  /// `call.o` describing its heads' output (dims and type; the output itself goes to host memory).
  /// Every rank's output is gathered into rank 0's `whole` ([B, every query head, q_len, value_dim]
  /// head-major, packed, of the call's output type; the other ranks pass nothing). A collective: every
  /// rank calls it with its part of the same call. Pages, an LSE output and modifiers are refused
  /// (UnsupportedError).
  HeadParallelReport run(const AttentionCall& call, const std::optional<Tensor>& whole);

 private:
  Runtime& rt_;
  Communicator& comm_;
  std::uint32_t queryHeads_, kvHeads_;
  FlashAttentionStep flash_;
  KvAppendStep append_;
  std::unique_ptr<VulkanDispatcher> dispatcher_;
  DeviceWorkspace workspace_;
  std::shared_ptr<Buffer> mineOut_, allOut_;  ///< host memory: this rank's output, and rank 0's gathered
};

}  // namespace foundry
