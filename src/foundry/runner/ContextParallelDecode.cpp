#include "foundry/runner/ContextParallelDecode.h"

#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/vk/Instance.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

namespace {

/// Rows [from, from + count) of dim 2 of a 4-d tensor: a view, no copy.
Tensor rows(Tensor t, std::uint32_t from, std::uint32_t count) {
  t.offset += std::uint64_t(from) * t.stride(2);
  t.dims[2] = count;
  return t;
}

/// Keeps `slot` as a tensor of `dtype` and `dims`, allocating only when it is not one already.
void keep(Runtime& rt, Tensor& slot, const std::string& name, DType dtype, const std::vector<std::int64_t>& dims,
          Layout layout = Layout::Contiguous) {
  if (!slot.buffer || slot.dtype != dtype || slot.dims != dims) slot = rt.allocate(name, dtype, dims, layout);
}

/// Keeps `part` as an output of `o`'s dtype and dims (head-major) with its f32 LSE.
void keep(Runtime& rt, MergePart& part, const std::string& name, DType dtype, const std::vector<std::int64_t>& oDims,
          const std::vector<std::int64_t>& lseDims) {
  keep(rt, part.o, name + "_o", dtype, oDims, Layout::HeadMajor);
  keep(rt, part.lse, name + "_lse", DType::F32, lseDims);
}

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

RuntimeOptions optionsForRank(RuntimeOptions options, const Communicator& comm) {
  if (options.device.empty()) {
    const auto count = static_cast<std::uint32_t>(VulkanInstance(false).devices().size());
    options.device = std::to_string(comm.localRank() % count);
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
  if (shards_.ranks() != comm_.size()) {
    throw UserError("ranks", fmt::format("{} shards ({}) for {} ranks; one shard per rank", shards_.ranks(),
                                         shards_.describe(), comm_.size()));
  }
}

void ContextParallelDecode::append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache,
                                   std::uint32_t pos0, const std::optional<KvAppendStep::Rope>& rope) {
  const KvShard mine = shards_.shard(comm_.rank());
  const auto tokens = static_cast<std::uint32_t>(kNew.dim(2));
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

ContextParallelReport ContextParallelDecode::decode(const AttentionCall& call) {
  const std::uint32_t rank = comm_.rank();
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
  RankTiming mine;
  mine.keys = keys;
  // This rank's partial: [o..., lse...] in f32, the layout every rank sends.
  std::vector<float> partial(oCount + rowsCount, 0.0f);
  for (std::uint64_t i = 0; i < rowsCount; ++i) partial[oCount + i] = -std::numeric_limits<float>::infinity();
  const std::vector<std::int64_t> oDims = whole.oDims(Layout::HeadMajor), lseDims = whole.lseDims();
  if (keys > 0) {
    keep(rt_, partial_, "cp_partial", whole.dtype, oDims, lseDims);
    local.o = partial_.o;
    local.lse = partial_.lse;
    StepContext ctx{*dispatcher_, workspace_, &rt_};
    flash_.run(ctx, local);
    mine.attentionMicros = dispatcher_->submit().totalGpuMicros;
    const auto o = rt_.download(local.o), lse = rt_.download(*local.lse);
    std::copy(o.begin(), o.end(), partial.begin());
    std::copy(lse.begin(), lse.end(), partial.begin() + static_cast<std::ptrdiff_t>(oCount));
  }
  mine.bytesSent = rank == 0 ? 0 : partial.size() * sizeof(float);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> all = comm_.gather(partial);
  mine.gatherMicros = micros(std::chrono::steady_clock::now() - t0);

  ContextParallelReport report;
  if (rank == 0) {
    parts_.resize(comm_.size());
    for (std::uint32_t r = 0; r < comm_.size(); ++r) {
      const float* at = all.data() + r * partial.size();
      keep(rt_, parts_[r], fmt::format("cp_part{}", r), whole.dtype, oDims, lseDims);
      rt_.upload(parts_[r].o, std::span<const float>(at, oCount));
      rt_.upload(parts_[r].lse, std::span<const float>(at + oCount, rowsCount));
    }
    MergeCall merge;
    merge.parts = parts_;
    merge.o = call.o;
    merge.lse = call.lse;
    StepContext ctx{*dispatcher_, workspace_, &rt_};
    merge_.run(ctx, merge);
    report.mergeMicros = dispatcher_->submit().totalGpuMicros;
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
