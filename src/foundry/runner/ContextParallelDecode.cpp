#include "foundry/runner/ContextParallelDecode.h"

#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Instance.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

namespace {

/// The token dim of new K/V rows: 1 token-major [B, T, Hkv, D], else 2 head-major [B, Hkv, T, D].
std::size_t tokenDim(const Tensor& t) { return t.layout == Layout::TokenMajor ? 1 : 2; }

/// Tokens [from, from + count) of new K/V rows: a view, no copy.
Tensor rows(Tensor t, std::uint32_t from, std::uint32_t count) {
  const std::size_t d = tokenDim(t);
  t.offset += std::uint64_t(from) * std::uint64_t(t.stride(d));
  t.dims[d] = count;
  return t;
}

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

RuntimeOptions optionsForRank(RuntimeOptions options, const Communicator& comm) {
  if (options.device.empty()) {
    // The host's GPUs, one a rank: a CPU driver (lavapipe) is taken only where there is no other
    // device, as one rank's default device would be.
    std::vector<std::uint32_t> pool, cpus;
    const VulkanInstance instance(false);
    for (const auto& d : instance.devices()) (d.info.kind == DeviceKind::Cpu ? cpus : pool).push_back(d.index);
    if (pool.empty()) pool = cpus;
    options.device = std::to_string(pool[comm.localRank() % pool.size()]);
    options.sources.byKnob["FOUNDRY_DEVICE"] = fmt::format("local rank {}", comm.localRank());
  }
  return options;
}

std::uint64_t ContextParallelReport::bytesMoved() const {
  std::uint64_t n = 0;
  for (const auto& r : ranks) n += r.bytesSent;
  return n;
}

ContextParallelDecode::ContextParallelDecode(Runtime& runtime, Communicator& comm, KvShards shards,
                                             AttentionOptions options)
    : rt_(runtime),
      comm_(comm),
      shards_(std::move(shards)),
      flash_(runtime.info(), runtime.snippets(), std::move(options)),
      merge_(runtime.info(), runtime.snippets()),
      append_(runtime.info(), runtime.snippets()),
      dispatcher_(runtime.dispatcher()),
      workspace_(runtime) {
  shards_.requireAgreement(comm_);
  shards_.requireRanks(comm_.size());
}

void ContextParallelDecode::append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache,
                                   std::uint32_t pos0, const std::optional<KvAppendStep::Rope>& rope) {
  const KvShard mine = shards_.shard(comm_.rank());
  const auto tokens = static_cast<std::uint32_t>(kNew.dim(tokenDim(kNew)));
  shards_.owner(pos0 + tokens - 1);  // the last position must exist somewhere
  const std::uint32_t from = std::max(pos0, mine.begin), to = std::min(pos0 + tokens, mine.end);
  if (from >= to) return;  // none of these positions is this rank's
  StepContext ctx{*dispatcher_, workspace_, &rt_};
  std::optional<KvAppendStep::Rope> r = rope;
  if (r) r->pos0 = rope->pos0 + (from - pos0);
  append_.run(ctx, rows(kNew, from - pos0, to - from), rows(vNew, from - pos0, to - from), kCache, vCache,
              from - mine.begin, r);
  dispatcher_->submit();
}

namespace {

/// Floats from `at` of a host staging buffer, as an f32 tensor of `dims` that kernels write and read
/// in place.
Tensor hostTensor(const std::shared_ptr<Buffer>& buffer, std::uint64_t at, const std::string& name,
                  const std::vector<std::int64_t>& dims, Layout layout) {
  Tensor t = Tensor::describe(name, DType::F32, dims, layout);
  t.buffer = buffer;
  t.offset = at;
  return t;
}

std::uint64_t roundUp(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

ContextParallelReport ContextParallelDecode::decode(const AttentionCall& call) {
  const std::uint32_t rank = comm_.rank(), ranks = comm_.size();
  if (call.kvLen == 0) throw UserError("kv_len", "0: a decode attends to at least its own token's key; accepted: 1 or more");
  const std::uint32_t keys = shards_.keysHeld(rank, call.kvLen);
  shards_.owner(call.kvLen - 1);  // the sequence's last position lies in some shard
  AttentionCall local = call;
  // The caches hold this rank's shard: the query sits at the sequence's last position, after every
  // key the rank holds, so no key is masked (the causal mask changes nothing at q_len 1).
  local.kvLen = std::max(keys, 1u);
  const AttentionProblem whole = flash_.validate(local);
  if (!whole.decode()) throw UserError("q_len", "context-parallel decode takes one query token (q_len 1)");
  const std::uint64_t rowsCount = std::uint64_t(whole.batch) * whole.nHeads;
  const std::uint64_t oCount = rowsCount * whole.vDim();
  // A rank's partial is [o | lse] in f32 (the LSE 256-byte aligned, as a binding's offset must be), in
  // host memory the attention writes and MPI sends from; rank 0 gathers every rank's into one host
  // buffer the merge reads in place. Nothing is copied between device and host but by the kernels.
  const std::uint64_t lseAt = roundUp(oCount, 64), partialFloats = roundUp(lseAt + rowsCount, 64);
  const std::vector<std::int64_t> oDims = whole.oDims(Layout::HeadMajor), lseDims = whole.lseDims();
  if (!mine_ || mine_->size() != partialFloats * 4) {
    mine_ = std::make_shared<Buffer>(rt_.device(), partialFloats * 4, "cp_partial", BufferUse::Staging);
    all_ = rank == 0 ? std::make_shared<Buffer>(rt_.device(), partialFloats * 4 * ranks, "cp_partials",
                                                BufferUse::Staging)
                     : nullptr;
  }
  partial_ = {hostTensor(mine_, 0, "cp_partial_o", oDims, Layout::HeadMajor),
              hostTensor(mine_, lseAt, "cp_partial_lse", lseDims, Layout::Contiguous)};
  const std::span<float> partial(reinterpret_cast<float*>(mine_->mapped().data()), partialFloats);
  ContextParallelReport report;
  RankTiming mine;
  mine.keys = keys;
  if (keys > 0) {
    local.o = partial_.o;
    local.lse = partial_.lse;
    StepContext ctx{*dispatcher_, workspace_, &rt_};
    flash_.run(ctx, local);
    const SubmitResult done = dispatcher_->submit();
    mine.attentionMicros = done.totalGpuMicros;
    for (const auto& d : done.dispatches) ++report.kernels[d.kernel];
  } else {
    // No key of the sequence yet: a zero output the merge weighs by nothing.
    std::fill(partial.begin(), partial.end(), 0.0f);
    std::fill_n(partial.begin() + static_cast<std::ptrdiff_t>(lseAt), rowsCount,
                -std::numeric_limits<float>::infinity());
  }
  mine.bytesSent = rank == 0 ? 0 : partial.size() * sizeof(float);
  const auto t0 = std::chrono::steady_clock::now();
  comm_.gather(std::as_bytes(partial), all_ ? all_->mapped() : std::span<std::byte>());
  mine.gatherMicros = micros(std::chrono::steady_clock::now() - t0);

  if (rank == 0) {
    parts_.resize(ranks);
    for (std::uint32_t r = 0; r < ranks; ++r) {
      parts_[r] = {hostTensor(all_, r * partialFloats, fmt::format("cp_part{}_o", r), oDims, Layout::HeadMajor),
                   hostTensor(all_, r * partialFloats + lseAt, fmt::format("cp_part{}_lse", r), lseDims,
                              Layout::Contiguous)};
    }
    MergeCall merge;
    merge.parts = parts_;
    merge.o = call.o;
    merge.lse = call.lse;
    StepContext ctx{*dispatcher_, workspace_, &rt_};
    merge_.run(ctx, merge);
    const SubmitResult done = dispatcher_->submit();
    report.mergeMicros = done.totalGpuMicros;
    for (const auto& d : done.dispatches) ++report.kernels[d.kernel];
  }
  // Every rank's timing, everywhere (the report is printed by rank 0).
  const std::vector<double> mineValues{double(mine.keys), mine.attentionMicros, mine.gatherMicros,
                                       double(mine.bytesSent)};
  const std::vector<double> values = comm_.allGather(mineValues);
  for (std::uint32_t r = 0; r < comm_.size(); ++r) {
    const double* v = values.data() + r * mineValues.size();
    report.ranks.push_back({static_cast<std::uint32_t>(v[0]), v[1], v[2], static_cast<std::uint64_t>(v[3])});
  }
  return report;
}

}  // namespace foundry
