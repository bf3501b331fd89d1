#pragma once
// Context-parallel decode: one sequence's KV cache sharded by position ranges over the ranks
// (KvShards), one Runtime per rank. Each rank attends the query over the keys it holds and returns
// its partial output with its log-sum-exp; rank 0 gathers the partials (MPI) and merges them with
// MergeStep into the attention over all keys. A rank that holds no key of the sequence yet sends a
// zero output with lse -inf, which the merge weighs by nothing.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foundry/Runtime.h"
#include "foundry/runner/Communicator.h"
#include "foundry/runner/KvShards.h"
#include "foundry/Workspace.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/MergeStep.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

class Buffer;

/// The device a rank opens: `options.device` if set, else the rank's place among this host's ranks
/// over the GPUs Vulkan lists (several ranks share a device when there are fewer; a CPU driver such as
/// lavapipe only where the host has no other device).
RuntimeOptions optionsForRank(RuntimeOptions options, const Communicator& comm);

/// What one rank did in a decode step.
struct RankTiming {
  std::uint32_t keys = 0;          ///< keys of the sequence it holds
  double attentionMicros = 0;      ///< its partial attention on its device (GPU time)
  double gatherMicros = 0;         ///< wall time in the gather, waiting for the slowest rank included
  std::uint64_t bytesSent = 0;     ///< its partial output and LSE
};

struct ContextParallelReport {
  std::vector<RankTiming> ranks;   ///< every rank's, on every rank
  double mergeMicros = 0;          ///< rank 0's merge kernel (GPU time)
  std::map<std::string, std::uint64_t> kernels;  ///< this rank's: kernel -> dispatches
  std::uint64_t bytesMoved() const;
};

class ContextParallelDecode {
 public:
  /// `kCache`/`vCache`: this rank's caches [B, Hkv, its shard's size (at least 1), D].
  ContextParallelDecode(Runtime& runtime, Communicator& comm, KvShards shards, AttentionOptions options);

  /// Writes new tokens' K/V ([B, Hkv, T, D] head-major or [B, T, Hkv, D] token-major, the same on every
  /// rank) at global positions
  /// pos0..pos0 + T - 1: each rank writes the rows its shard owns, at their rows in its cache.
  void append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache, std::uint32_t pos0,
              const std::optional<KvAppendStep::Rope>& rope = std::nullopt);

  /// Decode attention of `call.q` (q_len 1, on every rank) over the sequence's first `call.kvLen`
  /// positions, `call.k`/`call.v` being this rank's caches. Rank 0's `call.o` (and `call.lse` if set)
  /// receive the merged result; the other ranks' are left as they were.
  ContextParallelReport decode(const AttentionCall& call);

  const KvShards& shards() const { return shards_; }

 private:
  Runtime& rt_;
  Communicator& comm_;
  KvShards shards_;
  FlashAttentionStep flash_;
  MergeStep merge_;
  KvAppendStep append_;
  // Kept across decode steps: one dispatcher and workspace; this rank's partial output and LSE in host
  // memory (mine_), and on rank 0 every rank's, gathered into one host buffer (all_); both reallocated
  // only when the call's shape changes.
  std::unique_ptr<VulkanDispatcher> dispatcher_;
  DeviceWorkspace workspace_;
  std::shared_ptr<Buffer> mine_, all_;
  MergePart partial_;
  std::vector<MergePart> parts_;
};

}  // namespace foundry
