#pragma once
// One sequence's KV cache positions divided over ranks in contiguous ranges (context parallelism):
// rank r holds positions [begin_r, end_r) in its own cache, at rows 0..end_r - begin_r. Ranges may
// be uneven and may be empty; a new token's K/V goes to the rank that owns its position.
#include <cstdint>
#include <string>
#include <vector>

namespace foundry {

class Communicator;

struct KvShard {
  std::uint32_t begin = 0, end = 0;  ///< positions [begin, end)
  std::uint32_t size() const { return end - begin; }
};

class KvShards {
 public:
  /// `capacity` positions over `ranks` ranges, as even as possible: the first capacity % ranks ranges
  /// hold one position more. UserError for zero ranks.
  static KvShards even(std::uint32_t capacity, std::uint32_t ranks);
  /// `capacity` positions over `ranks` ranges of equal causal prefill work (RingPrefill): rank r's range
  /// ends near capacity * sqrt((r + 1) / ranks), so the ranges shrink with the rank.
  static KvShards causalBalanced(std::uint32_t capacity, std::uint32_t ranks);
  /// Ranges of the given sizes, in rank order (zero sizes allowed). UserError for an empty list.
  static KvShards ofSizes(const std::vector<std::uint32_t>& sizes);

  std::uint32_t ranks() const { return static_cast<std::uint32_t>(shards_.size()); }
  std::uint32_t capacity() const { return shards_.back().end; }
  const KvShard& shard(std::uint32_t rank) const { return shards_.at(rank); }
  /// The rank whose range holds `position`; UserError past the capacity.
  std::uint32_t owner(std::uint32_t position) const;
  /// Keys of the first `kvLen` positions that `rank` holds: its rows [0, keysHeld).
  std::uint32_t keysHeld(std::uint32_t rank, std::uint32_t kvLen) const;
  /// UserError unless there is one shard per rank.
  void requireRanks(std::uint32_t ranks) const;
  /// UserError on every rank unless every rank of `comm` holds these same shards (a collective: every
  /// rank calls it at once). Ranks given other shards would wait on each other or merge other ranges.
  void requireAgreement(Communicator& comm) const;
  /// "[0, 34) [34, 67) [67, 100)".
  std::string describe() const;

 private:
  std::vector<KvShard> shards_;
};

}  // namespace foundry
