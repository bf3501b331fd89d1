#include "foundry/runner/HeadParallelAttention.h"

#include <chrono>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/vk/Buffer.h"

namespace foundry {

HeadParallelAttention::HeadParallelAttention(Runtime& runtime, Communicator& comm, std::uint32_t queryHeads,
                                             std::uint32_t kvHeads, AttentionOptions options)
    : rt_(runtime),
      comm_(comm),
      queryHeads_(queryHeads),
      kvHeads_(kvHeads),
      flash_(runtime.info(), runtime.snippets(), std::move(options)),
      append_(runtime.info(), runtime.snippets()),
      dispatcher_(runtime.dispatcher()),
      workspace_(runtime) {
  if (kvHeads == 0 || queryHeads % kvHeads != 0) {
    throw UserError("n_heads", fmt::format("{} query heads over {} KV heads; a whole number of query heads per KV "
                                           "head", queryHeads, kvHeads));
  }
  if (kvHeads % comm.size() != 0) {
    throw UserError("ranks", fmt::format("{} KV heads do not divide over {} ranks; head-parallel attention gives "
                                         "every rank as many (accepted: a divisor of {})",
                                         kvHeads, comm.size(), kvHeads));
  }
}

HeadGroup HeadParallelAttention::group(std::uint32_t rank) const {
  const std::uint32_t per = kvHeads_ / comm_.size(), q = queryHeads_ / kvHeads_;
  return {rank * per, (rank + 1) * per, rank * per * q, (rank + 1) * per * q};
}

Tensor HeadParallelAttention::heads(Tensor t, std::uint32_t begin, std::uint32_t end) {
  const std::size_t d = t.layout == Layout::TokenMajor ? 2 : 1;
  t.offset += std::uint64_t(begin) * std::uint64_t(t.stride(d));
  t.dims[d] = end - begin;
  return t;
}

void HeadParallelAttention::append(const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache,
                                   std::uint32_t pos0, const std::optional<KvAppendStep::Rope>& rope) {
  const HeadGroup g = mine();
  StepContext ctx{*dispatcher_, workspace_, &rt_};
  append_.run(ctx, heads(kNew, g.kvBegin, g.kvEnd), heads(vNew, g.kvBegin, g.kvEnd), kCache, vCache, pos0, rope);
  dispatcher_->submit();
}

HeadParallelReport HeadParallelAttention::run(const AttentionCall& call, const std::optional<Tensor>& whole) {
  const std::uint32_t rank = comm_.rank(), ranks = comm_.size();
  if (call.pages || call.lse || !call.modifiers.empty()) {
    throw UnsupportedError(fmt::format("head-parallel attention of plain calls: {} take tensors of every head or "
                                       "every sequence; run them on one device",
                                       call.pages ? "pages" : call.lse ? "an LSE output" : "modifiers"));
  }
  const HeadGroup g = mine();
  const AttentionProblem p = flash_.validate(call);
  if (p.nHeads != g.queryHeads() || p.nKvHeads != g.kvHeads()) {
    throw UserError("q", fmt::format("rank {} owns query heads [{}, {}) and KV heads [{}, {}): q has {} heads and the "
                                     "caches {}", rank, g.qBegin, g.qEnd, g.kvBegin, g.kvEnd, p.nHeads, p.nKvHeads));
  }
  if (rank == 0) {
    // Every rank sends its heads; rank 0 puts them in place.
    const std::vector<std::int64_t> want{p.batch, queryHeads_, p.qLen, p.vDim()};
    if (!whole || whole->dims != want || !whole->packed() || whole->dtype != call.o.dtype) {
      throw UserError("o", fmt::format("{}; rank 0 gathers every rank's heads into a packed {} [{}, {}, {}, {}]",
                                       whole ? fmt::format("'{}' is {}", whole->name, whole->shapeString())
                                             : std::string("no whole output"),
                                       dtypeName(call.o.dtype), p.batch, queryHeads_, p.qLen, p.vDim()));
    }
  }
  const std::vector<std::int64_t> oDims = p.oDims(Layout::HeadMajor);
  const std::uint64_t bytes = storageBytes(call.o.dtype, std::uint64_t(p.batch) * p.nHeads * p.qLen * p.vDim());
  const std::uint64_t slot = (bytes + 255) / 256 * 256;
  if (!mineOut_ || mineOut_->size() != slot) {
    mineOut_ = std::make_shared<Buffer>(rt_.device(), slot, "hp_out", BufferUse::Staging);
    allOut_ = rank == 0 ? std::make_shared<Buffer>(rt_.device(), slot * ranks, "hp_outs", BufferUse::Staging) : nullptr;
  }
  // The output goes to host memory the kernel writes and MPI sends from: [B, its query heads, q_len,
  // value_dim] head-major, of the call's output type.
  AttentionCall local = call;
  local.o = Tensor::describe("hp_out", call.o.dtype, oDims, Layout::HeadMajor);
  local.o.buffer = mineOut_;

  HeadParallelReport report;
  HeadParallelTiming timing;
  StepContext ctx{*dispatcher_, workspace_, &rt_};
  flash_.run(ctx, local);
  const SubmitResult done = dispatcher_->submit();
  timing.attentionMicros = done.totalGpuMicros;
  for (const auto& d : done.dispatches) ++report.kernels[d.kernel];

  {
    const auto t0 = std::chrono::steady_clock::now();
    comm_.gather(mineOut_->mapped(), allOut_ ? allOut_->mapped() : std::span<std::byte>());
    timing.gatherMicros = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    timing.bytesSent = rank == 0 ? 0 : slot;
    if (rank == 0) {
      // Rank r's heads of sequence b are one run of the whole output's rows.
      const auto t1 = std::chrono::steady_clock::now();
      std::vector<VkBufferCopy> regions;
      const std::uint64_t run = storageBytes(call.o.dtype, std::uint64_t(g.queryHeads()) * p.qLen * p.vDim());
      for (std::uint32_t r = 0; r < ranks; ++r) {
        for (std::uint32_t b = 0; b < p.batch; ++b) {
          const std::uint64_t to = whole->offset + (std::uint64_t(b) * queryHeads_ + group(r).qBegin) * p.qLen * p.vDim();
          regions.push_back({r * slot + b * run, storageBytes(call.o.dtype, to), run});
        }
      }
      whole->buffer->copyFrom(*allOut_, regions);
      report.copyMicros = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
    }
  }
  const std::vector<double> mineValues{timing.attentionMicros, timing.gatherMicros, double(timing.bytesSent)};
  const std::vector<double> all = comm_.allGather(mineValues);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    report.ranks.push_back({all[3 * r], all[3 * r + 1], static_cast<std::uint64_t>(all[3 * r + 2])});
  }
  return report;
}

}  // namespace foundry
