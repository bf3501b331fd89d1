#pragma once
// Ring prefill (ring attention): one sequence's positions divided over the ranks in contiguous ranges
// (KvShards); rank r holds the queries, keys and values of its range. Its queries stay; the key/value
// blocks travel around the ring (rank r to r + 1), and at each step a rank attends its queries over
// the block it holds while the next block is already on its way (a non-blocking exchange posted
// before the attention). Each block's partial output and log-sum-exp are merged with MergeStep into
// the attention over every key the queries see.
//
// Causal: block j is entirely before rank r's queries when j < r, and entirely after them when j > r,
// so rank r attends its own block under the mask and blocks 0..r-1 without it; a block is sent on only
// as far as the last rank that sees it, so blocks nobody sees are never sent. Without the mask every
// block goes once around the ring. A block with no keys, or a rank with no queries, takes no part in
// the attention (the rank still passes blocks on). Shard sizes that fall with the rank
// (KvShards::causalBalanced) give every rank about the same causal work.
#include <cstdint>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include "foundry/Runtime.h"
#include "foundry/Workspace.h"
#include "foundry/runner/Communicator.h"
#include "foundry/runner/KvShards.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/MergeStep.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

class Buffer;

/// What one rank did in a ring prefill.
struct RingRankTiming {
  std::uint32_t queries = 0;       ///< rows of its range
  std::uint32_t blocks = 0;        ///< key blocks it attended (its own included)
  double attentionMicros = 0;      ///< its attention over every block (GPU time)
  double uploadMicros = 0;         ///< host to device copies of received blocks (wall time)
  double waitMicros = 0;           ///< wall time waiting for transfers after its attention was done
  double mergeMicros = 0;          ///< its merge of the partials (GPU time)
  double totalMicros = 0;          ///< wall time of the whole call on this rank
  std::uint64_t bytesSent = 0;     ///< key/value bytes it sent to the next rank
};

struct RingPrefillReport {
  std::vector<RingRankTiming> ranks;  ///< every rank's, on every rank
  std::map<std::string, std::uint64_t> kernels;  ///< this rank's: kernel -> dispatches
  std::uint64_t bytesMoved() const;
};

class RingPrefill {
 public:
  RingPrefill(Runtime& runtime, Communicator& comm, KvShards shards, AttentionOptions options);
  ~RingPrefill();

  /// This rank's part of the prefill of one sequence. `call.q` holds its queries (the positions of its
  /// shard; q_len the shard's size, or 1 for an empty shard, whose placeholder is not read), `call.k` and
  /// `call.v` its keys and values: [B, Hkv, capacity, D] kv-cache tensors of f16, bf16 or f32 (the bytes
  /// that travel) with packed rows, its positions at rows 0..shard size - 1 (a rank's decode cache). `call.kvLen` is ignored (the shard's size). `call.o` (and
  /// `call.lse` if set) receive the attention of its queries over all the keys they see. Modifiers,
  /// pages and fused RoPE are refused (UnsupportedError naming them): their positions are the whole
  /// sequence's. Every rank must call it with the same shapes.
  RingPrefillReport run(const AttentionCall& call);

  const KvShards& shards() const { return shards_; }

 private:
  /// True when rank `rank`'s queries see block `block`.
  bool sees(std::uint32_t rank, std::uint32_t block, bool causal) const;
  /// The number of hops block `block` travels: up to the last rank after it that sees it.
  std::uint32_t hops(std::uint32_t block, bool causal) const;

  Runtime& rt_;
  Communicator& comm_;
  KvShards shards_;
  FlashAttentionStep flash_;
  MergeStep merge_;
  std::unique_ptr<VulkanDispatcher> dispatcher_;
  DeviceWorkspace workspace_;
  std::vector<MergePart> parts_;                  ///< one per attended block, kept across calls
  std::map<std::uint32_t, std::pair<Tensor, Tensor>> blocks_;  ///< device K/V of received blocks, by size
  std::unique_ptr<Buffer> held_, next_;  ///< host staging: the block held and the one arriving
};

}  // namespace foundry
