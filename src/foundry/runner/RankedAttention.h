#pragma once
// A model run's attention over several ranks (`mpirun -np N foundry run`, docs/distributed.md): each
// rank holds one range of every sequence's positions in its own KV caches; the prompt runs as a ring
// prefill (RingPrefill) and every decode token as a context-parallel decode (ContextParallelDecode,
// merged on rank 0). The prompt's ranges are causally balanced; the decode tokens go to the last rank,
// whose prompt range is the shortest. Session drives it layer by layer and token by token.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "foundry/Runtime.h"
#include "foundry/runner/Communicator.h"
#include "foundry/runner/ContextParallelDecode.h"
#include "foundry/runner/KvShards.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/runner/RingPrefill.h"
#include "foundry/runner/RunReport.h"

namespace foundry {

struct RunRequest;

class RankedAttention {
 public:
  /// Positions [0, promptLen + decodeTokens) over `comm`'s ranks.
  RankedAttention(Runtime& runtime, Communicator& comm, std::uint32_t promptLen, std::uint32_t decodeTokens,
                  const AttentionOptions& options);

  /// UnsupportedError naming the first thing of `request` a run over several ranks does not do.
  static void checkSupported(const RunRequest& request);
  /// A collective: UserError on every rank, naming the field, where a rank was given another run than
  /// rank 0 (shapes, types, the seed its inputs come from, RoPE, the check). Ranks that disagree would
  /// exchange rows of other sizes (a hang, or memory written past a buffer) or merge other inputs.
  static void requireAgreement(Communicator& comm, const RunRequest& request);
  /// The rows rank `rank` of `ranks` keeps in its caches (its prompt positions and, on the last rank,
  /// the decode tokens; at least 1): what each rank allocates, and what its memory check counts.
  static std::uint32_t cacheRowsOf(std::uint32_t promptLen, std::uint32_t decodeTokens, std::uint32_t ranks,
                                   std::uint32_t rank);

  /// This rank's prompt positions, and the rows its caches need (its prompt positions and, on the
  /// last rank, the decode tokens; at least 1).
  KvShard prompt() const { return promptShards_.shard(comm_.rank()); }
  std::uint32_t cacheRows() const;
  /// Every rank's prompt positions (rank 0's check samples each rank's).
  const KvShards& promptShards() const { return promptShards_; }

  /// The ring prefill of this rank's prompt rows (`call.q`, rotated; the caches hold its rotated keys).
  void prefill(const AttentionCall& call);
  /// New K/V rows of position `pos` (the same on every rank) into the rank that owns it.
  void append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache, std::uint32_t pos,
              const std::optional<KvAppendStep::Rope>& rope);
  /// The decode of one token over every rank's keys; rank 0's `call.o` receives it.
  void decode(const AttentionCall& call);
  /// Each rank's prompt rows of `out` ([tokens, batch, heads, value_dim], `rowElements` a token's
  /// elements) copied into rank 0's `out`, so rank 0 holds every output.
  void gatherPromptRows(const Tensor& out, std::uint64_t rowElements);
  /// Every rank's figures (a collective: every rank calls it).
  RanksReport report();
  /// This rank's attention and merge kernels: kernel -> dispatches.
  const std::map<std::string, std::uint64_t>& kernels() const { return kernels_; }

 private:
  Runtime& rt_;
  Communicator& comm_;
  KvShards promptShards_, cacheShards_;
  RingPrefill ring_;
  ContextParallelDecode decode_;
  RankReport mine_;
  double decodeMergeMicros_ = 0;
  std::map<std::string, std::uint64_t> kernels_;
};

}  // namespace foundry
