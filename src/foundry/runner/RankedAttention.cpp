#include "foundry/runner/RankedAttention.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/runner/Session.h"
#include "foundry/vk/Buffer.h"

namespace foundry {

namespace {

/// The prompt's ranges, causally balanced; the decode tokens appended to the last rank's.
KvShards cacheShardsOf(const KvShards& prompt, std::uint32_t decodeTokens) {
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t r = 0; r < prompt.ranks(); ++r) sizes.push_back(prompt.shard(r).size());
  sizes.back() += decodeTokens;
  return KvShards::ofSizes(sizes);
}

/// A rank's cache rows: its shard's, at least 1 (a cache tensor is never empty).
std::uint32_t rowsKept(const KvShards& cache, std::uint32_t rank) { return std::max(cache.shard(rank).size(), 1u); }

}  // namespace

std::uint32_t RankedAttention::cacheRowsOf(std::uint32_t promptLen, std::uint32_t decodeTokens, std::uint32_t ranks,
                                           std::uint32_t rank) {
  return rowsKept(cacheShardsOf(KvShards::causalBalanced(promptLen, ranks), decodeTokens), rank);
}

std::uint32_t RankedAttention::cacheRows() const { return rowsKept(cacheShards_, comm_.rank()); }

void RankedAttention::requireAgreement(Communicator& comm, const RunRequest& request) {
  const ModelConfig& c = request.config;
  const RunSpec& r = c.run;
  double ropeFrequencies = 0;
  if (c.rope) {
    for (const double f : c.rope->inverseFrequencies(c.headDim)) ropeFrequencies += f;
  }
  const std::pair<const char*, double> fields[] = {
      {"/run/batch", r.batch},
      {"/run/prompt_len", r.promptLen},
      {"/run/decode_tokens", r.decodeTokens},
      {"/run/layers", r.layers},
      {"/run/dtype", static_cast<double>(r.dtype)},
      {"/run/kv_dtype", static_cast<double>(r.cacheType())},
      {"/run/seed (low 32 bits)", static_cast<double>(r.seed & 0xffffffffu)},
      {"/run/seed (high 32 bits)", static_cast<double>(r.seed >> 32)},
      {"/run/check", request.check ? 1.0 : 0.0},
      {"/attention/n_heads", c.nHeads},
      {"/attention/n_kv_heads", c.nKvHeads},
      {"/attention/head_dim", c.headDim},
      {"/attention/value_dim", c.vDim()},
      {"the softmax scale", c.softmaxScale},
      {"/attention/rope (its inverse frequencies' sum)", ropeFrequencies},
      {"/attention/rope (its pairing)", c.rope ? static_cast<double>(c.rope->pairing) : -1.0},
      {"/attention/rope (its attention factor)", c.rope ? c.rope->attentionScale() : 0.0},
  };
  constexpr std::size_t n = std::size(fields);
  std::vector<double> mine;
  for (const auto& f : fields) mine.push_back(f.second);
  const std::vector<double> all = comm.allGather(mine);
  for (std::uint32_t rank = 1; rank < comm.size(); ++rank) {
    for (std::size_t i = 0; i < n; ++i) {
      if (all[rank * n + i] != all[i]) {
        throw UserError(fields[i].first, fmt::format("rank {} runs with {} where rank 0 runs with {}: every rank of a "
                                                     "run over several ranks (mpirun) takes the same config, flags "
                                                     "and seed", rank, all[rank * n + i], all[i]));
      }
    }
  }
}

RankedAttention::RankedAttention(Runtime& runtime, Communicator& comm, std::uint32_t promptLen,
                                 std::uint32_t decodeTokens, const AttentionOptions& options)
    : rt_(runtime),
      comm_(comm),
      promptShards_(KvShards::causalBalanced(promptLen, comm.size())),
      cacheShards_(cacheShardsOf(promptShards_, decodeTokens)),
      ring_(runtime, comm, promptShards_, options),
      decode_(runtime, comm, cacheShards_, options) {
  mine_.begin = cacheShards_.shard(comm.rank()).begin;
  mine_.end = cacheShards_.shard(comm.rank()).end;
}

void RankedAttention::checkSupported(const RunRequest& request) {
  const ModelConfig& c = request.config;
  const auto refuse = [](const std::string& what) {
    throw UnsupportedError(fmt::format("{} in a run over several ranks (mpirun); run it on one rank", what));
  };
  if (request.inputs || request.expect || request.save) refuse("--inputs, --expect and --save");
  if (request.path != AttentionPath::Flash) refuse("--path reference");
  if (!c.run.promptLens.empty()) refuse("a prompt length per sequence (--prompt-lens, /run/prompt_lens)");
  if (c.run.pageSize) refuse("paged KV caches (--page-size)");
  if (quantized(c.run.cacheType())) refuse(fmt::format("--kv-dtype {}", dtypeName(c.run.cacheType())));
  if (c.vDim() != c.headDim) refuse("values of another width than the keys (value_dim, latent values)");
  for (std::uint32_t l = 0; l < c.run.layers; ++l) {
    if (!c.modifiersOf(l).empty()) refuse(fmt::format("attention modifiers (layer {})", l));
  }
}

void RankedAttention::prefill(const AttentionCall& call) {
  const RingPrefillReport r = ring_.run(call);
  const RingRankTiming& t = r.ranks[comm_.rank()];
  mine_.prefillAttentionMicros += t.attentionMicros;
  mine_.prefillWaitMicros += t.waitMicros;
  mine_.prefillMergeMicros += t.mergeMicros;
  mine_.prefillBytesSent += t.bytesSent;
  for (const auto& [k, n] : r.kernels) kernels_[k] += n;
}

void RankedAttention::append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache,
                             std::uint32_t pos, const std::optional<KvAppendStep::Rope>& rope) {
  decode_.append(kNew, vNew, kCache, vCache, pos, rope);
}

void RankedAttention::decode(const AttentionCall& call) {
  const ContextParallelReport r = decode_.decode(call);
  const RankTiming& t = r.ranks[comm_.rank()];
  mine_.decodeAttentionMicros += t.attentionMicros;
  mine_.decodeGatherMicros += t.gatherMicros;
  mine_.decodeBytesSent += t.bytesSent;
  decodeMergeMicros_ += r.mergeMicros;
  for (const auto& [k, n] : r.kernels) kernels_[k] += n;
}

void RankedAttention::gatherPromptRows(const Tensor& out, std::uint64_t rowElements) {
  const std::uint32_t rank = comm_.rank();
  const auto bytesAt = [&](std::uint32_t position) { return storageBytes(out.dtype, out.offset + rowElements * position); };
  for (std::uint32_t r = 1; r < comm_.size(); ++r) {
    const KvShard s = promptShards_.shard(r);
    if (s.size() == 0 || (rank != 0 && rank != r)) continue;
    std::vector<std::byte> rows(storageBytes(out.dtype, rowElements * s.size()));
    if (rank == r) {
      out.buffer->download(rows, bytesAt(s.begin));
      comm_.exchange(rows, 0u, {}, std::nullopt)->wait();
    } else {
      comm_.exchange({}, std::nullopt, rows, r)->wait();
      out.buffer->upload(rows, bytesAt(s.begin));
    }
  }
}

RanksReport RankedAttention::report() {
  const std::vector<double> values{double(mine_.begin),         double(mine_.end),
                                   mine_.prefillAttentionMicros, mine_.prefillWaitMicros,
                                   mine_.prefillMergeMicros,     double(mine_.prefillBytesSent),
                                   mine_.decodeAttentionMicros,  mine_.decodeGatherMicros,
                                   double(mine_.decodeBytesSent)};
  const std::vector<double> all = comm_.allGather(values);
  RanksReport out;
  out.decodeMergeMicros = decodeMergeMicros_;
  for (std::uint32_t r = 0; r < comm_.size(); ++r) {
    const double* v = all.data() + r * values.size();
    out.ranks.push_back({static_cast<std::uint32_t>(v[0]), static_cast<std::uint32_t>(v[1]), v[2], v[3], v[4],
                         static_cast<std::uint64_t>(v[5]), v[6], v[7], static_cast<std::uint64_t>(v[8])});
  }
  return out;
}

}  // namespace foundry
