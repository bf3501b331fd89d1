// foundry_cp_bench: context-parallel decode timed over MPI ranks, one device each.
//
//   mpirun -np N foundry_cp_bench --context C --heads 64 --kv-heads 8 --head-dim 128 --batch 1 --tokens T
//
// Each rank opens its device from its host-local rank (optionsForRank), allocates only its shard of one
// layer's K/V cache (KvShards::even over C positions) and fills it on its device with counter-based
// random values; then T decode steps of one query token over all C keys run through
// ContextParallelDecode::decode after a warm-up. `--direct` (one rank) times FlashAttentionStep over
// the whole cache on one device instead: no gather, no merge. Before timing, a small context is checked:
// the merged result against FlashAttentionStep over the same keys on one device, and both against the
// float64 reference. Rank 0 prints one JSON line: the medians, and each rank's figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <vector>

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"
#include "foundry/Random.h"
#include "foundry/Runtime.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "foundry/runner/ContextParallelDecode.h"
#include "foundry/runner/HeadParallelAttention.h"
#include "foundry/runner/MpiCommunicator.h"
#include "foundry/runner/RingPrefill.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/Options.h"
#include "foundry/steps/OutputComparison.h"
#include "foundry/steps/RandomFill.h"

namespace foundry {
namespace {

struct BenchOptions {
  std::uint32_t context = 0, heads = 64, kvHeads = 8, headDim = 128, batch = 1, tokens = 20, warmup = 3;
  std::uint32_t checkContext = 2048, seed = 1;
  std::string dtype = "f16";
  std::string split = "balanced";  ///< prefill: KvShards::causalBalanced, or "even"
  std::string shard = "positions";  ///< decode: positions (context-parallel) or heads (head-parallel)
  bool direct = false, prefill = false, bidirectional = false;
};

enum Seed : std::uint32_t { QuerySeed = 0, KeySeed = 1, ValueSeed = 2 };

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double micros(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

/// One rank's share of one layer's K/V cache over `context` positions, filled on the device: row j of
/// (batch b, KV head h) holds values of the whole cache's element ((b * Hkv + h) * context + begin + j) * D,
/// so every split of a context holds the same keys (the host regenerates them for the reference).
struct Shard {
  Tensor k, v;
  std::uint32_t begin = 0, rows = 0;
};

/// Rows `range` of heads [headBegin, headBegin + heads) of a [B, allHeads, context, D] tensor of the
/// whole sequence (allHeads 0: heads), filled on the device: row j of (b, h) holds the values of element
/// ((b * allHeads + headBegin + h) * context + begin + j) * D of the whole.
Tensor makeRows(Runtime& rt, const RandomFill& fill, const BenchOptions& o, DType dtype, std::uint32_t context,
                KvShard range, std::uint32_t heads, std::uint32_t seed, const std::string& name, Layout layout,
                std::uint32_t headBegin = 0, std::uint32_t allHeads = 0) {
  if (allHeads == 0) allHeads = heads;
  Tensor t = rt.allocate(name, dtype, {o.batch, heads, std::max(range.size(), 1u), o.headDim}, layout);
  if (range.size() == 0) return t;
  auto d = rt.dispatcher();
  for (std::uint32_t bh = 0; bh < o.batch * heads; ++bh) {
    const std::uint64_t whole = std::uint64_t(bh / heads) * allHeads + headBegin + bh % heads;
    const std::uint64_t first = (whole * context + range.begin) * o.headDim;
    // The rows of (b, h): a [1, 1, rows, D] view.
    Tensor view = t;
    view.offset += std::uint64_t(bh / heads) * std::uint64_t(t.stride(0)) + std::uint64_t(bh % heads) * std::uint64_t(t.stride(1));
    view.dims[0] = view.dims[1] = 1;
    fill.record(*d, view, o.seed * 3 + seed, first, std::uint64_t(range.size()) * o.headDim);
  }
  d->submit();
  return t;
}

Shard makeShard(Runtime& rt, const RandomFill& fill, const BenchOptions& o, DType dtype, std::uint32_t context,
                KvShard range, const std::string& tag) {
  return {makeRows(rt, fill, o, dtype, context, range, o.kvHeads, KeySeed, "k_" + tag, Layout::KvCache),
          makeRows(rt, fill, o, dtype, context, range, o.kvHeads, ValueSeed, "v_" + tag, Layout::KvCache),
          range.begin, range.size()};
}

AttentionCall decodeCall(Runtime& rt, const BenchOptions& o, DType dtype, const Shard& s, std::uint32_t kvLen) {
  AttentionCall call;
  const std::vector<std::int64_t> qDims{o.batch, o.heads, 1, o.headDim};
  call.q = rt.allocate("q", dtype, qDims, Layout::HeadMajor);
  rt.upload(call.q, randomUniforms(o.seed * 3 + QuerySeed, 0, std::size_t(o.batch) * o.heads * o.headDim));
  call.k = s.k, call.v = s.v, call.kvLen = kvLen;
  call.o = rt.allocate("o", dtype, qDims, Layout::HeadMajor);
  call.lse = rt.allocate("lse", DType::F32, {o.batch, o.heads, 1});
  rt.poison(call.o);
  rt.poison(*call.lse);
  return call;
}

/// Runs FlashAttentionStep once on this device and returns its GPU time.
double runFlash(Runtime& rt, FlashAttentionStep& flash, const AttentionCall& call) {
  auto d = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*d, workspace, &rt};
  flash.run(ctx, call);
  return d->submit().totalGpuMicros;
}

/// The check at a small context: every rank takes part; rank 0 returns the result (null elsewhere).
nlohmann::json check(Runtime& rt, Communicator& comm, const RandomFill& fill, const BenchOptions& o, DType dtype,
                     const AttentionOptions& options) {
  const std::uint32_t context = std::min(o.context, o.checkContext);
  const KvShards shards = KvShards::even(context, comm.size());
  FlashAttentionStep flash(rt.info(), rt.snippets(), options);
  std::optional<AttentionCall> cpCall;
  if (!o.direct) {
    const Shard mine = makeShard(rt, fill, o, dtype, context, shards.shard(comm.rank()), "check_shard");
    cpCall = decodeCall(rt, o, dtype, mine, context);
    ContextParallelDecode(rt, comm, shards, options).decode(*cpCall);
  }
  if (comm.rank() != 0) return nullptr;
  // The whole context on this one device, and the float64 reference over the same values.
  const Shard whole = makeShard(rt, fill, o, dtype, context, KvShard{0, context}, "check_whole");
  const AttentionCall single = decodeCall(rt, o, dtype, whole, context);
  runFlash(rt, flash, single);
  AttentionProblem p = flash.validate(single);
  const auto want = cpuAttention(p, rt.download(single.q), rt.download(whole.k), rt.download(whole.v));
  const double bound = dtype == DType::F32 ? 1e-4 : 3e-3;
  const auto singleOut = rt.download(single.o);
  const ErrorStats vsRef = compareOutputs(singleOut, want);
  nlohmann::json out{{"context", context}, {"bound", bound}, {"single_vs_reference", vsRef.reportedRel()}};
  bool passed = vsRef.passes(bound);
  if (cpCall) {
    const auto merged = rt.download(cpCall->o);
    const ErrorStats vsSingle = compareOutputs(merged, std::vector<double>(singleOut.begin(), singleOut.end()));
    const ErrorStats mergedVsRef = compareOutputs(merged, want);
    out["merged_vs_single"] = vsSingle.reportedRel();
    out["merged_vs_reference"] = mergedVsRef.reportedRel();
    passed = passed && vsSingle.passes(bound) && mergedVsRef.passes(bound);
  }
  out["passed"] = passed;
  return out;
}

/// The validation errors every rank's device reported, summed (a collective).
double allValidationErrors(Runtime& rt, Communicator& comm) {
  const double mine = double(rt.device().instance().validationErrors());
  double sum = 0;
  for (double v : comm.allGather(std::span<const double>(&mine, 1))) sum += v;
  return sum;
}

/// Per-step values of every rank, in rank order: allGather of `mine` (T values on each rank).
std::vector<std::vector<double>> perRank(Communicator& comm, const std::vector<double>& mine) {
  const std::vector<double> all = comm.allGather(mine);
  std::vector<std::vector<double>> out(comm.size());
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    out[r].assign(all.begin() + std::ptrdiff_t(r * mine.size()), all.begin() + std::ptrdiff_t((r + 1) * mine.size()));
  }
  return out;
}

/// Ring prefill: the positions each rank holds.
KvShards prefillShards(const BenchOptions& o, std::uint32_t context, std::uint32_t ranks) {
  return o.split == "even" ? KvShards::even(context, ranks) : KvShards::causalBalanced(context, ranks);
}

/// The prefill call of positions `range` of a `context`-long sequence: their queries, keys and values.
AttentionCall prefillCall(Runtime& rt, const RandomFill& fill, const BenchOptions& o, DType dtype, std::uint32_t context,
                          KvShard range, const std::string& tag) {
  AttentionCall call;
  call.q = makeRows(rt, fill, o, dtype, context, range, o.heads, QuerySeed, "q_" + tag, Layout::HeadMajor);
  const Shard kv = makeShard(rt, fill, o, dtype, context, range, tag);
  call.k = kv.k, call.v = kv.v;
  call.kvLen = std::max(range.size(), 1u);
  call.causal = !o.bidirectional;
  call.o = rt.allocate("o_" + tag, dtype, call.q.dims, Layout::HeadMajor);
  call.lse = rt.allocate("lse_" + tag, DType::F32, {o.batch, o.heads, call.q.dims[2]});
  rt.poison(call.o);
  rt.poison(*call.lse);
  return call;
}

/// Rows [begin, begin + n) of every (b, h) of a host [B, H, S, D] array.
std::vector<double> rowsOf(const std::vector<float>& all, std::uint64_t bh, std::uint64_t s, std::uint32_t d,
                           std::uint32_t begin, std::uint32_t n) {
  std::vector<double> out;
  out.reserve(bh * n * d);
  for (std::uint64_t i = 0; i < bh; ++i) {
    const auto at = all.begin() + static_cast<std::ptrdiff_t>((i * s + begin) * d);
    out.insert(out.end(), at, at + static_cast<std::ptrdiff_t>(std::uint64_t(n) * d));
  }
  return out;
}

/// The ring prefill check at a small context: each rank's rows against the prefill of the whole
/// sequence on its own device, and (rank 0) rows of that against the float64 reference.
nlohmann::json checkPrefill(Runtime& rt, Communicator& comm, const RandomFill& fill, const BenchOptions& o, DType dtype,
                            const AttentionOptions& options) {
  const std::uint32_t context = std::min(o.context, o.checkContext);
  const KvShards shards = prefillShards(o, context, comm.size());
  const KvShard mine = shards.shard(comm.rank());
  const double bound = dtype == DType::F32 ? 1e-4 : 3e-3;
  FlashAttentionStep flash(rt.info(), rt.snippets(), options);
  const AttentionCall whole = prefillCall(rt, fill, o, dtype, context, KvShard{0, context}, "check_whole");
  runFlash(rt, flash, whole);
  const auto wholeOut = rt.download(whole.o);
  double ringRel = 0, refRel = 0;
  bool passed = true;
  if (!o.direct) {
    const AttentionCall call = prefillCall(rt, fill, o, dtype, context, mine, "check_ring");
    RingPrefill(rt, comm, shards, options).run(call);
    if (mine.size() > 0) {
      const ErrorStats e = compareOutputs(rt.download(call.o), rowsOf(wholeOut, std::uint64_t(o.batch) * o.heads,
                                                                         context, o.headDim, mine.begin, mine.size()));
      ringRel = e.reportedRel();
      passed = e.passes(bound);
    }
  }
  if (comm.rank() == 0) {
    // Rows at the start, the middle and the end of the first and the last head.
    const AttentionProblem p = flash.validate(whole);
    const auto q = rt.download(whole.q), k = rt.download(whole.k), v = rt.download(whole.v);
    for (const std::uint32_t h : {0u, o.heads - 1}) {
      for (const std::uint32_t i : {0u, context / 2, context - 1}) {
        const auto want = cpuAttentionRow(p, q, k, v, 0, h, i);
        const auto at = wholeOut.begin() + static_cast<std::ptrdiff_t>((std::uint64_t(h) * context + i) * o.headDim);
        const ErrorStats e = compareOutputs(std::vector<float>(at, at + o.headDim), want);
        refRel = std::max(refRel, e.reportedRel());
        passed = passed && e.passes(bound);
      }
    }
  }
  const std::vector<double> mineValues{double(passed), ringRel};
  const std::vector<double> all = comm.allGather(mineValues);
  nlohmann::json out{{"context", context}, {"bound", bound}, {"single_vs_reference_rows", refRel}};
  double worst = 0;
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    passed = passed && all[2 * r] != 0.0;
    worst = std::max(worst, all[2 * r + 1]);
  }
  if (!o.direct) out["ring_vs_single"] = worst;
  out["passed"] = passed;
  return out;
}

/// Head-parallel decode (`--shard heads`): rank r holds every position of its KV heads; each step's
/// outputs are gathered on rank 0. Checked at --check-context against one device and the reference.
int runHeads(Communicator& comm, const BenchOptions& o, Runtime& rt, const RandomFill& fill, DType dtype,
             const AttentionOptions& options) {
  HeadParallelAttention hp(rt, comm, o.heads, o.kvHeads, options);
  const HeadGroup g = hp.mine();
  const auto cacheOf = [&](std::uint32_t context, const std::string& tag) {
    return Shard{makeRows(rt, fill, o, dtype, context, {0, context}, g.kvHeads(), KeySeed, "k_" + tag, Layout::KvCache,
                          g.kvBegin, o.kvHeads),
                 makeRows(rt, fill, o, dtype, context, {0, context}, g.kvHeads(), ValueSeed, "v_" + tag,
                          Layout::KvCache, g.kvBegin, o.kvHeads),
                 0, context};
  };
  const auto callOf = [&](const Shard& s, std::uint32_t context) {
    AttentionCall call = decodeCall(rt, o, dtype, s, context);
    call.q = HeadParallelAttention::heads(call.q, g.qBegin, g.qEnd);
    call.o = Tensor::describe("o_heads", dtype, {o.batch, g.queryHeads(), 1, o.headDim}, Layout::HeadMajor);
    call.lse.reset();
    return call;
  };
  nlohmann::json result{{"bench", "cp_decode"}, {"mode", "head_parallel"}, {"ranks", comm.size()},
                        {"context", o.context}, {"batch", o.batch}, {"heads", o.heads}, {"kv_heads", o.kvHeads},
                        {"head_dim", o.headDim}, {"dtype", o.dtype}, {"tokens", o.tokens}, {"warmup", o.warmup},
                        {"device", rt.info().name}};
  const std::vector<std::int64_t> wholeDims{o.batch, o.heads, 1, o.headDim};
  {
    // The check: rank 0's gathered output against one device over every head, and the reference.
    const std::uint32_t context = std::min(o.context, o.checkContext);
    const AttentionCall call = callOf(cacheOf(context, "check_heads"), context);
    std::optional<Tensor> whole;
    if (comm.rank() == 0) whole = rt.allocate("o_whole", dtype, wholeDims, Layout::HeadMajor);
    if (whole) rt.poison(*whole);
    hp.run(call, whole);
    double passed = 1;
    if (comm.rank() == 0) {
      const Shard all = makeShard(rt, fill, o, dtype, context, KvShard{0, context}, "check_all");
      const AttentionCall single = decodeCall(rt, o, dtype, all, context);
      FlashAttentionStep flash(rt.info(), rt.snippets(), options);
      runFlash(rt, flash, single);
      const double bound = dtype == DType::F32 ? 1e-4 : 3e-3;
      const auto got = rt.download(*whole), one = rt.download(single.o);
      const ErrorStats vsSingle = compareOutputs(got, std::vector<double>(one.begin(), one.end()));
      const ErrorStats vsRef = compareOutputs(
          got, cpuAttention(flash.validate(single), rt.download(single.q), rt.download(all.k), rt.download(all.v)));
      passed = vsSingle.passes(bound) && vsRef.passes(bound);
      result["check"] = {{"context", context}, {"bound", bound}, {"gathered_vs_single", vsSingle.reportedRel()},
                         {"gathered_vs_reference", vsRef.reportedRel()}, {"passed", passed != 0}};
    }
    if (comm.allGather(std::span<const double>(&passed, 1))[0] == 0.0) {
      if (comm.rank() == 0) std::printf("%s\n", result.dump().c_str());
      return 1;
    }
  }
  const AttentionCall call = callOf(cacheOf(o.context, "cache"), o.context);
  std::optional<Tensor> whole;
  if (comm.rank() == 0) whole = rt.allocate("o_whole", dtype, wholeDims, Layout::HeadMajor);
  std::vector<double> wall, attention, gather, copy, bytes;
  for (std::uint32_t s = 0; s < o.warmup + o.tokens; ++s) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const HeadParallelReport report = hp.run(call, whole);
    const double us = micros(std::chrono::steady_clock::now() - t0);
    if (s < o.warmup) continue;
    wall.push_back(us);
    attention.push_back(report.ranks[comm.rank()].attentionMicros);
    gather.push_back(report.ranks[comm.rank()].gatherMicros);
    copy.push_back(report.copyMicros);
    std::uint64_t moved = 0;
    for (const auto& r : report.ranks) moved += r.bytesSent;
    bytes.push_back(double(moved));
  }
  const auto walls = perRank(comm, wall), attentions = perRank(comm, attention), gathers = perRank(comm, gather);
  const double validationErrors = allValidationErrors(rt, comm);
  if (comm.rank() != 0) return validationErrors > 0 ? 1 : 0;
  nlohmann::json ranks = nlohmann::json::array();
  double slowest = 0;
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    const std::uint64_t cacheBytes = 2ull * o.batch * hp.group(r).kvHeads() * o.context * o.headDim * dtypeBytes(dtype);
    ranks.push_back({{"rank", r}, {"kv_heads", {hp.group(r).kvBegin, hp.group(r).kvEnd}}, {"cache_bytes", cacheBytes},
                     {"step_us", median(walls[r])}, {"attention_us", median(attentions[r])},
                     {"gather_us", median(gathers[r])}});
    slowest = std::max(slowest, median(attentions[r]));
  }
  result["step_us"] = median(wall);
  result["step_us_min"] = *std::min_element(wall.begin(), wall.end());
  result["attention_us_slowest_rank"] = slowest;
  result["gather_us"] = median(gather);
  result["merge_us"] = median(copy);  // rank 0's copy of the gathered heads into place
  result["bytes_per_step"] = median(bytes);
  result["per_rank"] = ranks;
  result["validation_errors"] = static_cast<std::uint64_t>(validationErrors);
  std::printf("%s\n", result.dump().c_str());
  return validationErrors > 0 ? 1 : 0;
}

int runPrefill(Communicator& comm, const BenchOptions& o, Runtime& rt, const RandomFill& fill, DType dtype,
               const AttentionOptions& options) {
  const KvShards shards = prefillShards(o, o.context, comm.size());
  nlohmann::json result{{"bench", "ring_prefill"}, {"mode", o.direct ? "direct" : "ring"}, {"ranks", comm.size()},
                        {"context", o.context}, {"split", o.direct ? "none" : shards.describe()},
                        {"causal", !o.bidirectional}, {"batch", o.batch}, {"heads", o.heads},
                        {"kv_heads", o.kvHeads}, {"head_dim", o.headDim}, {"dtype", o.dtype},
                        {"iterations", o.tokens}, {"warmup", o.warmup}, {"device", rt.info().name}};
  result["check"] = checkPrefill(rt, comm, fill, o, dtype, options);
  if (!result["check"]["passed"].get<bool>()) {
    if (comm.rank() == 0) std::printf("%s\n", result.dump().c_str());
    return 1;
  }
  const KvShard range = o.direct ? KvShard{0, o.context} : shards.shard(comm.rank());
  const AttentionCall call = prefillCall(rt, fill, o, dtype, o.context, range, "run");
  FlashAttentionStep flash(rt.info(), rt.snippets(), options);
  RingPrefill ring(rt, comm, shards, options);
  std::vector<double> wall;
  std::vector<std::vector<double>> last;  // the last iteration's figures of every rank
  for (std::uint32_t s = 0; s < o.warmup + o.tokens; ++s) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> figures;
    if (o.direct) {
      figures = {double(o.context), 1, runFlash(rt, flash, call), 0, 0, 0, 0, 0};
    } else {
      const RingRankTiming t = ring.run(call).ranks[comm.rank()];
      figures = {double(t.queries), double(t.blocks), t.attentionMicros, t.uploadMicros, t.waitMicros,
                 t.mergeMicros,     t.totalMicros,    double(t.bytesSent)};
    }
    comm.barrier();  // the prefill is done when the slowest rank is
    const double us = micros(std::chrono::steady_clock::now() - t0);
    if (s < o.warmup) continue;
    wall.push_back(us);
    last = perRank(comm, figures);
  }
  const double validationErrors = allValidationErrors(rt, comm);
  if (comm.rank() != 0) return validationErrors > 0 ? 1 : 0;
  const double s = o.context, pairs = o.bidirectional ? s * s : s * (s + 1) / 2;
  const double flops = 4.0 * o.batch * o.heads * o.headDim * pairs;
  nlohmann::json ranks = nlohmann::json::array();
  std::uint64_t bytes = 0;
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    const auto& f = last[r];
    ranks.push_back({{"rank", r}, {"queries", f[0]}, {"blocks", f[1]}, {"attention_us", f[2]}, {"upload_us", f[3]},
                     {"wait_us", f[4]}, {"merge_us", f[5]}, {"total_us", f[6]}, {"bytes_sent", f[7]}});
    bytes += static_cast<std::uint64_t>(f[7]);
  }
  result["prefill_us"] = median(wall);
  result["prefill_us_min"] = *std::min_element(wall.begin(), wall.end());
  result["tflops"] = flops / median(wall) * 1e-6;
  result["bytes_moved"] = bytes;
  result["per_rank"] = ranks;
  result["validation_errors"] = static_cast<std::uint64_t>(validationErrors);
  if (validationErrors > 0) result["last_validation_error"] = rt.device().instance().lastValidationError();
  std::printf("%s\n", result.dump().c_str());
  return validationErrors > 0 ? 1 : 0;
}

int run(Communicator& comm, const BenchOptions& o) {
  const std::optional<DType> parsed = parseDType(o.dtype);
  if (!parsed || (*parsed != DType::F16 && *parsed != DType::F32)) {
    throw UserError("--dtype", fmt::format("'{}'; accepted: f16, f32", o.dtype));
  }
  const DType dtype = *parsed;
  if (o.direct && comm.size() != 1) {
    throw UserError("--direct", fmt::format("{} ranks; the single-device baseline runs on one rank", comm.size()));
  }
  if (o.tokens == 0) throw UserError("--tokens", "0; at least 1 timed decode step");
  const Options knobs = Options::fromEnvironment();
  const AttentionOptions& options = knobs.attention;
  Runtime rt(optionsForRank(knobs.runtime, comm));
  const RandomFill fill(rt, dtype);
  if (o.prefill) return runPrefill(comm, o, rt, fill, dtype, options);
  if (o.shard == "heads") return runHeads(comm, o, rt, fill, dtype, options);

  nlohmann::json result{{"bench", "cp_decode"}, {"mode", o.direct ? "direct" : "context_parallel"},
                        {"ranks", comm.size()}, {"context", o.context}, {"batch", o.batch}, {"heads", o.heads},
                        {"kv_heads", o.kvHeads}, {"head_dim", o.headDim}, {"dtype", o.dtype},
                        {"tokens", o.tokens}, {"warmup", o.warmup}, {"device", rt.info().name}};
  const nlohmann::json checked = check(rt, comm, fill, o, dtype, options);
  const double passed = comm.rank() == 0 ? double(checked.at("passed").get<bool>()) : 1.0;
  if (comm.allGather(std::span<const double>(&passed, 1))[0] == 0.0) {
    if (comm.rank() == 0) {
      result["check"] = checked;
      std::printf("%s\n", result.dump().c_str());
    }
    return 1;
  }

  const KvShards shards = KvShards::even(o.context, comm.size());
  const KvShard range = o.direct ? KvShard{0, o.context} : shards.shard(comm.rank());
  const Shard mine = makeShard(rt, fill, o, dtype, o.context, range, "cache");
  const AttentionCall call = decodeCall(rt, o, dtype, mine, o.context);
  std::vector<double> wall, attention, gather, merge, bytes;
  if (o.direct) {
    FlashAttentionStep flash(rt.info(), rt.snippets(), options);
    for (std::uint32_t s = 0; s < o.warmup + o.tokens; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      const double gpu = runFlash(rt, flash, call);
      if (s < o.warmup) continue;
      wall.push_back(micros(std::chrono::steady_clock::now() - t0));
      attention.push_back(gpu);
    }
    gather.assign(o.tokens, 0.0), merge.assign(o.tokens, 0.0), bytes.assign(o.tokens, 0.0);
  } else {
    ContextParallelDecode cp(rt, comm, shards, options);
    for (std::uint32_t s = 0; s < o.warmup + o.tokens; ++s) {
      comm.barrier();  // every rank starts the step together: the wall time is the step's
      const auto t0 = std::chrono::steady_clock::now();
      const ContextParallelReport report = cp.decode(call);
      const double us = micros(std::chrono::steady_clock::now() - t0);
      if (s < o.warmup) continue;
      const RankTiming& me = report.ranks[comm.rank()];
      wall.push_back(us);
      attention.push_back(me.attentionMicros);
      gather.push_back(me.gatherMicros);
      merge.push_back(report.mergeMicros);
      bytes.push_back(double(report.bytesMoved()));
    }
  }
  const auto walls = perRank(comm, wall), attentions = perRank(comm, attention), gathers = perRank(comm, gather);
  const double validationErrors = allValidationErrors(rt, comm);
  if (comm.rank() != 0) return validationErrors > 0 ? 1 : 0;
  nlohmann::json ranks = nlohmann::json::array();
  double slowestAttention = 0;
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    const KvShard sr = o.direct ? range : shards.shard(r);
    const std::uint64_t cacheBytes = 2ull * o.batch * o.kvHeads * sr.size() * o.headDim * dtypeBytes(dtype);
    ranks.push_back({{"rank", r}, {"keys", sr.size()}, {"cache_bytes", cacheBytes},
                     {"step_us", median(walls[r])}, {"attention_us", median(attentions[r])},
                     {"gather_us", median(gathers[r])}});
    slowestAttention = std::max(slowestAttention, median(attentions[r]));
  }
  result["check"] = checked;
  result["step_us"] = median(wall);
  result["step_us_min"] = *std::min_element(wall.begin(), wall.end());
  result["attention_us_slowest_rank"] = slowestAttention;
  result["gather_us"] = median(gather);
  result["merge_us"] = median(merge);
  result["bytes_per_step"] = median(bytes);
  result["per_rank"] = ranks;
  result["validation_errors"] = static_cast<std::uint64_t>(validationErrors);
  if (validationErrors > 0) result["last_validation_error"] = rt.device().instance().lastValidationError();
  std::printf("%s\n", result.dump().c_str());
  return validationErrors > 0 ? 1 : 0;
}

}  // namespace
}  // namespace foundry

int main(int argc, char** argv) {
  foundry::BenchOptions o;
  CLI::App app{"Context-parallel decode over MPI ranks, timed (one JSON line from rank 0)", "foundry_cp_bench"};
  app.add_option("--context", o.context, "keys of the sequence, sharded evenly over the ranks")->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "query heads")->capture_default_str();
  app.add_option("--kv-heads", o.kvHeads, "KV heads")->capture_default_str();
  app.add_option("--head-dim", o.headDim, "head dim")->capture_default_str();
  app.add_option("--batch", o.batch, "sequences")->capture_default_str();
  app.add_option("--tokens", o.tokens, "timed decode steps")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed decode steps first")->capture_default_str();
  app.add_option("--dtype", o.dtype, "K/V, query and output storage: f16 or f32")->capture_default_str();
  app.add_option("--check-context", o.checkContext, "context of the correctness check before timing")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "random stream of q, K and V")->capture_default_str();
  app.add_flag("--direct", o.direct, "FlashAttentionStep over the whole cache on one device (one rank)");
  app.add_flag("--prefill", o.prefill,
               "ring prefill of --context positions (RingPrefill); --tokens timed prefills after --warmup");
  app.add_option("--split", o.split, "prefill: positions per rank, causally balanced or even")
      ->check(CLI::IsMember({"balanced", "even"}))->capture_default_str();
  app.add_flag("--bidirectional", o.bidirectional, "prefill without the causal mask");
  app.add_option("--shard", o.shard, "decode: divide the cache by positions (context-parallel) or by KV heads")
      ->check(CLI::IsMember({"positions", "heads"}))->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  foundry::MpiCommunicator comm;
  try {
    return foundry::run(comm, o);
  } catch (const std::exception& e) {
    // The other ranks may wait in a collective for this one: end the whole job.
    std::fprintf(stderr, "foundry_cp_bench: rank %u: %s\n", comm.rank(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
}
