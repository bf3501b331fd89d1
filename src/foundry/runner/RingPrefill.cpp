#include "foundry/runner/RingPrefill.h"

#include <chrono>
#include <span>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Device.h"

namespace foundry {

namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

/// Bytes of a packed tensor's elements.
std::uint64_t bytesOf(const Tensor& t) { return storageBytes(t.dtype, static_cast<std::uint64_t>(t.numel())); }

/// Bytes of a block's K and V, back to back, as they travel.
std::uint64_t blockBytes(const Tensor& k, const Tensor& v) { return bytesOf(k) + bytesOf(v); }

/// The device side of rows [0, rows) of each (batch, head) of a [B, H, capacity, D] cache, and where
/// they sit in a packed block from `packedAt` bytes: one region per (batch, head).
std::vector<VkBufferCopy> cacheRegions(const Tensor& t, std::uint32_t rows, std::uint64_t packedAt, bool toCache) {
  std::vector<VkBufferCopy> regions;
  const std::uint64_t rowBytes = storageBytes(t.dtype, std::uint64_t(rows) * std::uint64_t(t.dim(3)));
  for (std::int64_t b = 0; b < t.dim(0); ++b) {
    for (std::int64_t h = 0; h < t.dim(1); ++h) {
      const std::uint64_t at = storageBytes(t.dtype, t.offset + std::uint64_t(b * t.stride(0) + h * t.stride(1)));
      regions.push_back(toCache ? VkBufferCopy{packedAt, at, rowBytes} : VkBufferCopy{at, packedAt, rowBytes});
      packedAt += rowBytes;
    }
  }
  return regions;
}

/// Copies rows [0, rows) of K and V into `staging` (device to host), packed and back to back.
void stage(const Tensor& k, const Tensor& v, std::uint32_t rows, Buffer& staging) {
  const auto kRegions = cacheRegions(k, rows, 0, false);
  staging.copyFrom(*k.buffer, kRegions);
  staging.copyFrom(*v.buffer, cacheRegions(v, rows, kRegions.empty() ? 0 : kRegions.back().dstOffset + kRegions.back().size, false));
}

/// Copies a packed block from `staging` into K and V (host to device).
void unstage(const Buffer& staging, const Tensor& k, const Tensor& v) {
  k.buffer->copyFrom(staging, 0, storageBytes(k.dtype, k.offset), bytesOf(k));
  v.buffer->copyFrom(staging, bytesOf(k), storageBytes(v.dtype, v.offset), bytesOf(v));
}

}  // namespace

std::uint64_t RingPrefillReport::bytesMoved() const {
  std::uint64_t n = 0;
  for (const auto& r : ranks) n += r.bytesSent;
  return n;
}

RingPrefill::RingPrefill(Runtime& runtime, Communicator& comm, KvShards shards, AttentionOptions options)
    : rt_(runtime),
      comm_(comm),
      shards_(std::move(shards)),
      flash_(runtime.info(), runtime.snippets(), std::move(options)),
      merge_(runtime.info(), runtime.snippets()),
      dispatcher_(runtime.dispatcher()),
      workspace_(runtime) {
  shards_.requireAgreement(comm_);
  shards_.requireRanks(comm_.size());
}

RingPrefill::~RingPrefill() = default;

bool RingPrefill::sees(std::uint32_t rank, std::uint32_t block, bool causal) const {
  return shards_.shard(rank).size() > 0 && shards_.shard(block).size() > 0 && (!causal || block <= rank);
}

std::uint32_t RingPrefill::hops(std::uint32_t block, bool causal) const {
  const std::uint32_t n = comm_.size();
  std::uint32_t last = 0;
  for (std::uint32_t p = 1; p < n; ++p) {
    if (sees((block + p) % n, block, causal)) last = p;
  }
  return last;
}

RingPrefillReport RingPrefill::run(const AttentionCall& call) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint32_t rank = comm_.rank(), n = comm_.size();
  const std::uint32_t mine = shards_.shard(rank).size();
  if (!call.modifiers.empty() || call.pages || call.rope) {
    throw UnsupportedError(fmt::format("ring prefill takes the causal mask alone: {} are placed by positions of the "
                                       "whole sequence; run them on one device",
                                       call.pages ? "pages" : call.rope ? "fused RoPE" : "modifiers"));
  }
  for (const Tensor* t : {&call.k, &call.v}) {
    if (t->dtype != DType::F16 && t->dtype != DType::BF16 && t->dtype != DType::F32) {
      throw UnsupportedError(fmt::format("ring prefill sends f16, bf16 or f32 key/value blocks; '{}' is {}", t->name,
                                         dtypeName(t->dtype)));
    }
    if (t->rank() != 4 || t->layout == Layout::TokenMajor || t->dim(2) < std::max(mine, 1u) ||
        t->stride(3) != 1 || t->stride(2) != t->dim(3)) {
      throw UserError(t == &call.k ? "k" : "v",
                      fmt::format("'{}' is {}; ring prefill takes this rank's keys as a [B, Hkv, capacity, D] cache "
                                  "with packed rows, its positions at rows 0..{} (its shard {} of {})",
                                  t->name, t->shapeString(), std::max(mine, 1u) - 1, rank, shards_.describe()));
    }
  }
  AttentionCall own = call;
  own.kvLen = std::max(mine, 1u);
  const AttentionProblem problem = flash_.validate(own);
  if (problem.qLen != own.kvLen) {
    throw UserError("q", fmt::format("q has {} query rows; rank {} holds positions {} of {}: one query per position",
                                     problem.qLen, rank, own.kvLen, shards_.describe()));
  }
  const std::vector<std::int64_t> oDims = problem.oDims(Layout::HeadMajor), lseDims = problem.lseDims();

  RingRankTiming timing;
  timing.queries = mine;
  std::map<std::string, std::uint64_t> kernels;
  // Blocks travel through host memory the device copies to and from, received by MPI straight into it:
  // two buffers of the largest block, the one held (attended and passed on) and the one arriving.
  const auto dimsOf = [&](std::uint32_t b, std::uint32_t dim) {
    return std::vector<std::int64_t>{problem.batch, problem.nKvHeads, shards_.shard(b).size(), dim};
  };
  const auto bytesOfBlock = [&](std::uint32_t b) {
    return blockBytes(Tensor::describe("k", call.k.dtype, dimsOf(b, problem.headDim)),
                      Tensor::describe("v", call.v.dtype, dimsOf(b, problem.vDim())));
  };
  std::uint64_t largest = 4;
  for (std::uint32_t b = 0; b < n; ++b) largest = std::max(largest, bytesOfBlock(b));
  for (auto* slot : {&held_, &next_}) {
    if (n > 1 && (!*slot || (*slot)->size() < largest)) {
      *slot = std::make_unique<Buffer>(rt_.device(), largest, slot == &held_ ? "ring_held" : "ring_next",
                                       BufferUse::Staging);
    }
  }
  if (hops(rank, call.causal) > 0) stage(call.k, call.v, mine, *held_);
  std::uint32_t attended = 0;
  for (std::uint32_t s = 0; s < n; ++s) {
    const std::uint32_t block = (rank + n - s) % n;
    const bool holds = s == 0 || s <= hops(block, call.causal);
    // Pass the block on while attending it; receive the one this rank holds at the next step.
    const bool sending = holds && s + 1 <= hops(block, call.causal);
    const std::uint32_t incoming = (rank + 2 * n - s - 1) % n;
    const bool receiving = s + 1 < n && s + 1 <= hops(incoming, call.causal);
    const auto transfer = comm_.exchange(
        sending ? std::span<const std::byte>(held_->mapped().first(bytesOfBlock(block))) : std::span<const std::byte>(),
        sending ? std::optional<std::uint32_t>((rank + 1) % n) : std::nullopt,
        receiving ? next_->mapped().first(bytesOfBlock(incoming)) : std::span<std::byte>(),
        receiving ? std::optional<std::uint32_t>((rank + n - 1) % n) : std::nullopt);
    if (sending) timing.bytesSent += bytesOfBlock(block);

    if (holds && sees(rank, block, call.causal)) {
      AttentionCall part = own;
      if (s > 0) {
        // Another rank's block lies entirely before these queries (or the call has no mask).
        const std::uint32_t size = shards_.shard(block).size();
        auto& slot = blocks_[size];
        if (!slot.first.buffer || slot.first.dtype != call.k.dtype || slot.first.dims != dimsOf(block, problem.headDim) ||
            slot.second.dims != dimsOf(block, problem.vDim())) {
          slot = {rt_.allocate(fmt::format("ring_k{}", size), call.k.dtype, dimsOf(block, problem.headDim),
                               Layout::KvCache),
                  rt_.allocate(fmt::format("ring_v{}", size), call.v.dtype, dimsOf(block, problem.vDim()),
                               Layout::KvCache)};
        }
        const auto t0 = std::chrono::steady_clock::now();
        unstage(*held_, slot.first, slot.second);
        timing.uploadMicros += micros(std::chrono::steady_clock::now() - t0);
        part.k = slot.first, part.v = slot.second;
        part.kvLen = size;
        part.causal = false;
      }
      if (parts_.size() <= attended) parts_.emplace_back();
      MergePart& out = parts_[attended++];
      if (!out.o.buffer || out.o.dims != oDims) {
        out.o = rt_.allocate(fmt::format("ring_part{}_o", attended), DType::F32, oDims, Layout::HeadMajor);
        out.lse = rt_.allocate(fmt::format("ring_part{}_lse", attended), DType::F32, lseDims);
      }
      part.o = out.o;
      part.lse = out.lse;
      StepContext ctx{*dispatcher_, workspace_, &rt_};
      flash_.run(ctx, part);
      // While the device attends, keep the transfer moving: MPI moves a large message only inside
      // its own calls (through shared memory, a fragment per call on each side), so a transfer left
      // alone until wait() would not overlap the attention, and one polled between sleeps would
      // crawl. On a GPU, poll without sleeping until it is done, then wait for the device gently; on
      // a CPU driver the device's work runs on these cores, so every poll sleeps.
      const bool spin = rt_.info().kind != DeviceKind::Cpu;
      const Submission running = dispatcher_->submitAsync();
      bool moved = false;
      while (!rt_.device().reached(running.value)) {
        if (!moved) moved = transfer->test();
        if (moved || !spin) std::this_thread::sleep_for(std::chrono::microseconds(moved ? 100 : 20));
      }
      const SubmitResult done = dispatcher_->wait(running);
      timing.attentionMicros += done.totalGpuMicros;
      for (const auto& d : done.dispatches) ++kernels[d.kernel];
    }
    const auto t0 = std::chrono::steady_clock::now();
    transfer->wait();
    timing.waitMicros += micros(std::chrono::steady_clock::now() - t0);
    if (receiving) std::swap(held_, next_);
  }
  timing.blocks = attended;
  if (attended > 0) {
    MergeCall merge;
    merge.parts.assign(parts_.begin(), parts_.begin() + attended);
    merge.o = call.o;
    merge.lse = call.lse;
    StepContext ctx{*dispatcher_, workspace_, &rt_};
    merge_.run(ctx, merge);
    const SubmitResult done = dispatcher_->submit();
    timing.mergeMicros = done.totalGpuMicros;
    for (const auto& d : done.dispatches) ++kernels[d.kernel];
  }
  timing.totalMicros = micros(std::chrono::steady_clock::now() - start);

  const std::vector<double> mineValues{double(timing.queries),      double(timing.blocks),  timing.attentionMicros,
                                       timing.uploadMicros,         timing.waitMicros,      timing.mergeMicros,
                                       timing.totalMicros,          double(timing.bytesSent)};
  const std::vector<double> values = comm_.allGather(mineValues);
  RingPrefillReport report;
  report.kernels = std::move(kernels);
  for (std::uint32_t r = 0; r < n; ++r) {
    const double* v = values.data() + r * mineValues.size();
    report.ranks.push_back({static_cast<std::uint32_t>(v[0]), static_cast<std::uint32_t>(v[1]), v[2], v[3], v[4], v[5],
                            v[6], static_cast<std::uint64_t>(v[7])});
  }
  return report;
}

}  // namespace foundry
