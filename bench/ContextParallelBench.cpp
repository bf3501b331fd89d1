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
#include "foundry/runner/MpiCommunicator.h"
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
  bool direct = false;
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

Shard makeShard(Runtime& rt, const RandomFill& fill, const BenchOptions& o, DType dtype, std::uint32_t context,
                KvShard range, const std::string& tag) {
  Shard s{.begin = range.begin, .rows = range.size()};
  const std::vector<std::int64_t> dims{o.batch, o.kvHeads, std::max(range.size(), 1u), o.headDim};
  s.k = rt.allocate("k_" + tag, dtype, dims, Layout::KvCache);
  s.v = rt.allocate("v_" + tag, dtype, dims, Layout::KvCache);
  if (range.size() == 0) return s;
  auto d = rt.dispatcher();
  for (std::uint32_t bh = 0; bh < o.batch * o.kvHeads; ++bh) {
    const std::uint64_t first = (std::uint64_t(bh) * context + range.begin) * o.headDim;
    const std::uint64_t count = std::uint64_t(range.size()) * o.headDim;
    // The rows of (b, h): a [1, 1, rows, D] view.
    Tensor k = s.k, v = s.v;
    for (Tensor* t : {&k, &v}) {
      t->offset += std::uint64_t(bh / o.kvHeads) * std::uint64_t(t->stride(0)) +
                   std::uint64_t(bh % o.kvHeads) * std::uint64_t(t->stride(1));
      t->dims[0] = t->dims[1] = 1;
    }
    fill.record(*d, k, o.seed * 3 + KeySeed, first, count);
    fill.record(*d, v, o.seed * 3 + ValueSeed, first, count);
  }
  d->submit();
  return s;
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

/// Per-step values of every rank, in rank order: allGather of `mine` (T values on each rank).
std::vector<std::vector<double>> perRank(Communicator& comm, const std::vector<double>& mine) {
  const std::vector<double> all = comm.allGather(mine);
  std::vector<std::vector<double>> out(comm.size());
  for (std::uint32_t r = 0; r < comm.size(); ++r) {
    out[r].assign(all.begin() + std::ptrdiff_t(r * mine.size()), all.begin() + std::ptrdiff_t((r + 1) * mine.size()));
  }
  return out;
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
  const double validation = double(rt.device().instance().validationErrors());
  double validationErrors = 0;
  for (double v : comm.allGather(std::span<const double>(&validation, 1))) validationErrors += v;
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
