#include "foundry/runner/KvShards.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/runner/Communicator.h"

namespace foundry {

KvShards KvShards::even(std::uint32_t capacity, std::uint32_t ranks) {
  if (ranks == 0) throw UserError("ranks", "0 ranks cannot hold a KV cache; accepted: 1 or more");
  std::vector<std::uint32_t> sizes(ranks, capacity / ranks);
  for (std::uint32_t r = 0; r < capacity % ranks; ++r) ++sizes[r];
  return ofSizes(sizes);
}

KvShards KvShards::causalBalanced(std::uint32_t capacity, std::uint32_t ranks) {
  if (ranks == 0) throw UserError("ranks", "0 ranks cannot hold a KV cache; accepted: 1 or more");
  // Rank r's causal work is (end_r^2 - begin_r^2) / 2 query-key pairs: equal shares put end_r at
  // capacity * sqrt((r + 1) / ranks).
  std::vector<std::uint32_t> sizes;
  std::uint32_t begin = 0;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const double share = std::sqrt(double(r + 1) / double(ranks));
    const auto end = r + 1 == ranks ? capacity
                                    : std::clamp(static_cast<std::uint32_t>(std::llround(capacity * share)), begin,
                                                 capacity);
    sizes.push_back(end - begin);
    begin = end;
  }
  return ofSizes(sizes);
}

KvShards KvShards::ofSizes(const std::vector<std::uint32_t>& sizes) {
  if (sizes.empty()) throw UserError("ranks", "no ranks to hold the KV cache; accepted: one size per rank");
  KvShards s;
  std::uint64_t at = 0;
  for (std::uint32_t size : sizes) {
    if (at + size > 0xffffffffull) throw UserError("ranks", "the shards hold more than 2^32 positions");
    s.shards_.push_back({static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + size)});
    at += size;
  }
  return s;
}

std::uint32_t KvShards::owner(std::uint32_t position) const {
  for (std::uint32_t r = 0; r < ranks(); ++r) {
    if (position >= shards_[r].begin && position < shards_[r].end) return r;
  }
  throw UserError("position", fmt::format("position {} is past the sharded cache's capacity {} ({})", position,
                                          capacity(), describe()));
}

std::uint32_t KvShards::keysHeld(std::uint32_t rank, std::uint32_t kvLen) const {
  const KvShard& s = shard(rank);
  return std::clamp(kvLen, s.begin, s.end) - s.begin;
}

void KvShards::requireRanks(std::uint32_t ranks) const {
  if (this->ranks() != ranks) {
    throw UserError("ranks", fmt::format("{} shards ({}) for {} ranks; one shard per rank", this->ranks(), describe(),
                                         ranks));
  }
}

void KvShards::requireAgreement(Communicator& comm) const {
  // A digest of one length on every rank, exact in doubles: the count, then a 32-bit FNV-1a of the ranges.
  std::uint32_t hash = 2166136261u;
  for (const auto& s : shards_) {
    for (const std::uint32_t v : {s.begin, s.end}) {
      for (int byte = 0; byte < 4; ++byte) hash = (hash ^ ((v >> (8 * byte)) & 0xffu)) * 16777619u;
    }
  }
  const std::vector<double> mine = {static_cast<double>(shards_.size()), static_cast<double>(hash)};
  const std::vector<double> all = comm.allGather(mine);
  for (std::uint32_t rank = 0; rank < comm.size(); ++rank) {
    if (all[2 * rank] != mine[0] || all[2 * rank + 1] != mine[1]) {
      throw UserError("shards", fmt::format("rank {} holds other shards than rank {} ({}): every rank takes the same "
                                            "shards", rank, comm.rank(), describe()));
    }
  }
}

std::string KvShards::describe() const {
  std::string out;
  for (const auto& s : shards_) out += fmt::format("{}[{}, {})", out.empty() ? "" : " ", s.begin, s.end);
  return out;
}

}  // namespace foundry
