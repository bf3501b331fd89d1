#include "BenchSuite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <numeric>
#include <random>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/CeilingStages.h"
#include "foundry/stages/modifiers/AlibiStage.h"
#include "foundry/stages/modifiers/SinksStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/PagedKv.h"
#include "foundry/steps/Selector.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/PipelineCache.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry::bench {

std::string Shape::name() const {
  std::string mods;
  for (const auto& m : modifiers) mods += fmt::format(" +{}", m);
  if (kind == "decode") return fmt::format("decode B{} D{} kv{}{}", batch, headDim, kvLen, mods);
  return fmt::format("prefill B{} D{} S{}{}{}", batch, headDim, qLen, causal ? " causal" : "", mods);
}

DType Shape::dtype() const {
  return std::find(modifiers.begin(), modifiers.end(), "bf16") != modifiers.end() ? DType::BF16 : DType::F16;
}

DType Shape::cacheType() const {
  for (const auto& m : modifiers) {
    if (m == "int8") return DType::I8;
    if (m == "q8_0") return DType::Q8_0;
  }
  return dtype();
}

bool Shape::kvTokenMajor() const { return std::find(modifiers.begin(), modifiers.end(), "kvtok") != modifiers.end(); }

std::uint32_t Shape::pageSize() const {
  for (const auto& m : modifiers) {
    if (m.starts_with("pg")) return static_cast<std::uint32_t>(std::stoul(m.substr(2)));
  }
  return 0;
}

std::uint32_t Shape::window() const {
  for (const auto& m : modifiers) {
    if (m.starts_with("window")) return static_cast<std::uint32_t>(std::stoul(m.substr(6)));
  }
  return 0;
}

double Shape::flops() const {
  const std::uint32_t w = window();
  if (w && causal && qLen == kvLen && w < kvLen) {
    // Query i sees min(i + 1, w) keys.
    const double pairs = 0.5 * w * (w + 1.0) + double(qLen - w) * w;
    return 4.0 * batch * heads * pairs * headDim;
  }
  return 4.0 * batch * heads * qLen * double(kvLen) * headDim * (causal && qLen == kvLen ? 0.5 : 1.0);
}

double Shape::kvBytes() const {
  const std::uint32_t w = window();
  const double keys = kind == "decode" && w ? std::min(w, kvLen) : kvLen;
  return 2.0 * static_cast<double>(cacheBytes(cacheType(), std::uint64_t(batch) * kvHeads * std::uint64_t(keys), headDim));
}

std::vector<Shape> shapesFor(const std::string& suite) {
  std::vector<Shape> out;
  const bool all = suite == "all";
  if (suite == "smoke") {  // small enough for a CPU driver
    out.push_back({"decode", 1, 8, 2, 1, 512, 64, false});
    out.push_back({"prefill", 1, 8, 2, 128, 128, 64, true});
    return out;
  }
  if (all || suite == "decode") {
    for (std::uint32_t d : {64u, 128u}) {
      for (std::uint32_t kv : {1024u, 4096u, 16384u, 65536u}) out.push_back({"decode", 1, 32, 8, 1, kv, d, false});
    }
    for (std::uint32_t kv : {4096u, 16384u}) out.push_back({"decode", 8, 32, 8, 1, kv, 128, false});
  }
  if (all || suite == "prefill") {
    for (std::uint32_t d : {64u, 128u}) {
      for (std::uint32_t s : {512u, 2048u, 8192u}) out.push_back({"prefill", 1, 32, 8, s, s, d, true});
    }
  }
  if (suite == "modifiers") {
    // What each modifier costs where it costs most: the same shapes with and without it (a window
    // as long as the cache does the same work as none, so it shows the masks' own cost).
    std::vector<Shape> base = {{"decode", 1, 32, 8, 1, 16384, 128, false},
                               {"decode", 1, 32, 8, 1, 65536, 128, false},
                               {"decode", 8, 32, 8, 1, 16384, 128, false},
                               {"prefill", 1, 32, 8, 2048, 2048, 128, true},
                               {"prefill", 1, 32, 8, 8192, 8192, 128, true}};
    for (const auto& b : base) {
      out.push_back(b);
      for (const std::string& m : {fmt::format("window{}", b.kvLen), std::string("softcap50"), std::string("alibi"),
                                  std::string("sinks")}) {
        Shape s = b;
        s.modifiers = {m};
        out.push_back(s);
      }
    }
    // A window's speed: causal prefill at 32768 with and without a 4096-key window; decode at 65536
    // with one against plain decode at 4096.
    Shape p{"prefill", 1, 32, 8, 32768, 32768, 128, true};
    out.push_back(p);
    p.modifiers = {"window4096"};
    out.push_back(p);
    out.push_back({"decode", 1, 32, 8, 1, 4096, 128, false});
    Shape d{"decode", 1, 32, 8, 1, 65536, 128, false};
    d.modifiers = {"window4096"};
    out.push_back(d);
    return out;
  }
  if (out.empty() && suite != "ceilings") {
    throw UserError("--suite", fmt::format("'{}'; accepted: decode, prefill, modifiers, ceilings, all, smoke", suite));
  }
  return out;
}

Runner::Runner(Runtime& runtime, Options options) : rt_(runtime), options_(std::move(options)) {}

// Calls run back to back in batches (a barrier between calls keeps them from overlapping), so the
// GPU stays busy and at its working clock, as it would in a model; each call is timed from its
// first dispatch's start to its last dispatch's end. A batch is queued before the one ahead of it is
// waited for, so the GPU never idles while the host reads timings and records: with a gap after each
// batch the H200's driver held its clock at 1155-1710 MHz instead of 1980 in some processes, and
// compute-bound kernels took up to 40% longer there (docs/performance.md, "The bench's clock").
// Warm-up lasts until the GPU has been busy for a while (clocks ramp up over tens of milliseconds),
// then samples are taken until there are enough of them and enough GPU time.
double Runner::timeCall(const std::function<void(Dispatcher&, std::uint32_t)>& record, std::uint32_t copies,
                        std::vector<double>& samples, double* batchUs) {
  auto dispatcher = rt_.dispatcher();
  std::uint32_t next = 0;
  struct Queued {
    Submission submission;
    std::uint32_t calls = 0;
  };
  auto queue = [&](std::uint32_t calls) {
    for (std::uint32_t c = 0; c < calls; ++c) {
      record(*dispatcher, next++ % copies);
      dispatcher->barrier();
    }
    return Queued{dispatcher->submitAsync(), calls};
  };
  // Queues a batch of `calls` and waits for the batch ahead of it (with queueAhead false, in the other
  // order); the waited batch's calls' times go to `out`.
  Queued ahead = queue(1);
  auto take = [&](std::uint32_t calls, std::vector<double>& out) {
    const Queued now = ahead;
    if (options_.queueAhead) ahead = queue(calls);
    const SubmitResult r = dispatcher->wait(now.submission);
    if (!options_.queueAhead) ahead = queue(calls);
    // Group the submission's dispatches into calls: every call records the same number of dispatches.
    const std::size_t each = r.dispatches.size() / now.calls;
    for (std::uint32_t c = 0; c < now.calls; ++c) {
      const auto& first = r.dispatches[c * each];
      const auto& last = r.dispatches[c * each + each - 1];
      out.push_back(last.endMicros - first.startMicros);
    }
    return std::pair{r.totalGpuMicros, now.calls};
  };
  auto batchFor = [](double estimate) {
    return estimate > 0 ? std::clamp<std::uint32_t>(std::uint32_t(5000.0 / estimate), 1, 128) : 1u;
  };
  double busy = 0, estimate = 0;
  std::uint32_t warmed = 0;
  std::vector<double> scratch;
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  while (warmed < options_.warmup || busy < options_.warmupMicros || seconds() < options_.warmupSeconds) {
    scratch.clear();
    const auto [gpu, calls] = take(batchFor(estimate), scratch);
    busy += gpu;
    warmed += calls;
    estimate = *std::min_element(scratch.begin(), scratch.end());
  }
  samples.clear();
  double measured = 0;
  std::uint32_t timed = 0;
  while (samples.size() < options_.runs || measured < options_.minTimedMicros) {
    const auto [gpu, calls] = take(batchFor(std::max(estimate, 1.0)), samples);
    measured += gpu;
    timed += calls;
  }
  if (batchUs) *batchUs = measured / timed;
  dispatcher->wait(ahead.submission);  // the batch queued last, untimed
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

Ceilings Runner::measureCeilings() {
  Ceilings c;
  const DeviceInfo& dev = rt_.info();
  const std::uint32_t sg = dev.subgroupSize;
  {
    // The largest power-of-two buffer up to 1 GiB the device binds in one descriptor, grid-strided over
    // 8 workgroups an SM.
    std::uint64_t mib = 1024;
    while ((mib << 20) > dev.maxStorageBufferRange || (mib << 20) > dev.maxAllocationBytes / 2) mib >>= 1;
    const ReadStream stream =
        prepareRead({mib, std::max<std::uint32_t>(dev.computeUnits * 8, 8), std::max(256u, sg), 1});
    std::vector<double> samples;
    const double us = timeCall([&](Dispatcher& d, std::uint32_t) { stream.dispatch(d); }, 1, samples);
    c.readGBs = double(mib << 20) / us / 1e3;
    // The same kernel with nothing to read: what a call costs before it does any work.
    auto empty = [&](Dispatcher& d) { stream.dispatch(d, 0, 1); };
    c.emptyDispatchUs = timeCall([&](Dispatcher& d, std::uint32_t) { empty(d); }, 1, samples);
    c.dependentPairUs = timeCall(
        [&](Dispatcher& d, std::uint32_t) {
          empty(d);
          d.barrier();
          empty(d);
        },
        1, samples);
  }
  if (dev.hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    const std::uint32_t groups = dev.computeUnits * 4, warps = 4, iterations = 4096;
    const std::vector<float> ones(512, 1.0f / 64.0f);
    const Tensor operands = rt_.allocate("operands", DType::F16, {512});
    rt_.upload(operands, ones);
    const Tensor result = rt_.allocate("result", DType::F32, {std::int64_t(groups) * warps * 1024});
    const KernelSource k = rt_.builder().workgroup(warps * sg).emplace<MmaLoopStage>().build();
    std::vector<double> samples;
    const double us = timeCall(
        [&](Dispatcher& d, std::uint32_t) {
          d.dispatch(k, Arguments().bind("operands", operands).bind("result", result).set("iterations", iterations),
                     {groups});
        },
        1, samples);
    const double flops = double(groups) * warps * iterations * 4 * 2.0 * 16 * 16 * 16;
    c.mmaTflops = flops / us / 1e6;
  }
  return c;
}

namespace {

std::vector<float> randomValues(std::size_t n, std::uint32_t seed, DType dtype) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return decodeElements(encodeElements(v, dtype), dtype);
}

}  // namespace

Prepared Runner::prepare(const Shape& s) {
  Prepared pr;
  pr.shape = s;
  AttentionProblem& p = pr.problem;
  p.batch = s.batch;
  p.nHeads = s.heads;
  p.nKvHeads = s.kvHeads;
  p.qLen = s.qLen;
  p.kvLen = s.kvLen;
  p.kvCapacity = s.kvLen;
  p.headDim = s.headDim;
  p.dtype = s.cacheType();
  if (s.dtype() != p.dtype) p.queryType = p.outputType = s.dtype();
  p.causal = s.causal;
  for (const auto& m : s.modifiers) {
    auto perHead = [&](const std::string& name, std::vector<double> values) {
      PerHeadValues v;
      v.values = std::move(values);
      v.tensor = rt_.allocate(name, DType::F32, {p.nHeads});
      rt_.upload(v.tensor, std::vector<float>(v.values.begin(), v.values.end()));
      return v;
    };
    if (m.starts_with("window")) {
      p.modifiers.push_back(SlidingWindowStage::fromModelWindow(s.window()));
    } else if (m.starts_with("softcap")) {
      p.modifiers.push_back(std::make_shared<SoftCapStage>(std::stod(m.substr(7))));
    } else if (m == "alibi") {
      p.modifiers.push_back(std::make_shared<AlibiStage>(perHead("alibi_slopes", AlibiStage::alibiSlopes(p.nHeads))));
    } else if (m == "bf16" || m == "kvtok" || m == "int8" || m == "q8_0" || m.starts_with("pg")) {
      continue;  // storage, not a modifier
    } else if (m == "sinks") {
      std::vector<double> logits;
      for (std::uint32_t h = 0; h < p.nHeads; ++h) logits.push_back(-2.0 + 0.25 * h);
      p.modifiers.push_back(std::make_shared<SinksStage>(perHead("attn_sinks", logits)));
    }
  }
  const DType rounding = quantized(p.dtype) ? s.dtype() : p.dtype;  // quantized caches: rounded as they upload
  pr.q = randomValues(std::size_t(p.batch) * p.nHeads * p.qLen * p.headDim, 11, s.dtype());
  pr.k = randomValues(std::size_t(p.batch) * p.nKvHeads * p.kvCapacity * p.headDim, 12, rounding);
  pr.v = randomValues(pr.k.size(), 13, rounding);
  PackedCacheRows rows{p.nKvHeads, p.kvCapacity, s.kvTokenMajor(), s.pageSize(), 0, {}};
  std::uint32_t seqs = p.batch;
  if (rows.pageSize) {
    rows.maxPages = (p.kvCapacity + rows.pageSize - 1) / rows.pageSize;
    seqs = p.batch * rows.maxPages;
    rows.table.resize(seqs);
    std::iota(rows.table.begin(), rows.table.end(), 0u);
    std::shuffle(rows.table.begin(), rows.table.end(), std::mt19937(17));
  }
  const std::uint32_t perSeq = rows.pageSize ? rows.pageSize : p.kvCapacity;
  const std::vector<std::int64_t> cacheDims = rows.tokenMajor
                                                  ? std::vector<std::int64_t>{seqs, perSeq, p.nKvHeads, p.headDim}
                                                  : std::vector<std::int64_t>{seqs, p.nKvHeads, perSeq, p.headDim};
  const Layout cacheLayout = rows.tokenMajor ? Layout::TokenMajor : Layout::KvCache;
  const std::size_t deviceRows = std::size_t(seqs) * p.nKvHeads * perSeq, hostRows = pr.k.size() / p.headDim;
  const std::vector<float> kUp = rows.toDevice(pr.k, p.headDim, deviceRows, 0.0f);
  const std::vector<float> vUp = rows.toDevice(pr.v, p.headDim, deviceRows, 0.0f);
  Tensor table;
  if (rows.pageSize) {
    table = rt_.allocate("block_table", DType::U32, {p.batch, rows.maxPages});
    rt_.upload(table, std::span<const std::uint32_t>(rows.table));
  }
  // Enough copies that one pass over what the calls read exceeds four times the L2 (a windowed
  // decode reads its window only: sized by the cache, its copies' windows could stay in the L2).
  const double setBytes = 2.0 * pr.q.size() + s.kvBytes();
  const auto copies = static_cast<std::uint32_t>(std::clamp(std::ceil(4.0 * options_.l2Bytes / setBytes) + 1, 1.0, 64.0));
  pr.calls.resize(copies);
  for (auto& call : pr.calls) {
    call.q = rt_.allocate("q", s.dtype(), p.qDims(Layout::HeadMajor), Layout::HeadMajor);
    call.k = rt_.allocate("k_cache", p.dtype, cacheDims, cacheLayout);
    call.v = rt_.allocate("v_cache", p.dtype, cacheDims, cacheLayout);
    call.o = rt_.allocate("o", s.dtype(), p.qDims(Layout::HeadMajor), Layout::HeadMajor);
    rt_.upload(call.q, pr.q);
    rt_.upload(call.k, kUp);
    rt_.upload(call.v, vUp);
    call.kvLen = p.kvLen;
    call.causal = p.causal;
    call.modifiers = p.modifiers;
    if (rows.pageSize) call.pages = PagedKv{table, rows.table};
  }
  if (quantized(p.dtype)) {
    // The reference reads what the kernels read: the dequantized cache (head-major).
    for (auto [cache, values] : {std::pair{&pr.calls[0].k, &pr.k}, std::pair{&pr.calls[0].v, &pr.v}}) {
      *values = rows.fromDevice(rt_.download(*cache), p.headDim, hostRows);
    }
  }
  return pr;
}

Result Runner::measure(Prepared& pr, const AttentionOptions& knobs, const Ceilings& ceilings) {
  const Shape& s = pr.shape;
  const AttentionProblem& p = pr.problem;
  Result res;
  res.shape = s;
  res.copies = static_cast<std::uint32_t>(pr.calls.size());
  FlashAttentionStep step(rt_.info(), rt_.snippets(), knobs);
  DeviceWorkspace workspace(rt_);

  // Correctness first: sampled rows of copy 0 against the CPU float64 reference.
  {
    rt_.poison(pr.calls[0].o);
    auto d = rt_.dispatcher();
    StepContext ctx{*d, workspace, &rt_};
    const StepRecord rec = step.run(ctx, pr.calls[0]);
    d->submit();
    res.kernels = rec.kernels;
    res.plan = rec.plan.describe();
    const auto got = rt_.download(pr.calls[0].o);
    std::mt19937 gen(7);
    std::vector<float> gotRows;
    std::vector<double> wantRows;
    for (std::uint32_t n = 0; n < options_.checkRows; ++n) {
      const std::uint32_t b = gen() % p.batch, h = gen() % p.nHeads;
      const std::uint32_t i = n == 0 ? p.qLen - 1 : gen() % p.qLen;
      const auto want = cpuAttentionRow(p, pr.q, pr.k, pr.v, b, h, i);
      const std::size_t at = qIndex(p, Layout::HeadMajor, b, h, i);
      gotRows.insert(gotRows.end(), got.begin() + at, got.begin() + at + p.headDim);
      wantRows.insert(wantRows.end(), want.begin(), want.begin() + p.headDim);
    }
    const ErrorStats e = compareOutputs(gotRows, wantRows);
    res.relError = e.reportedRel();
    // Six units of rounding of the output's format: bf16 keeps 8 bits where f16 keeps 11.
    res.checked = e.passes(s.dtype() == DType::BF16 ? 1.2e-2 : 3e-3);
  }
  std::vector<double> samples;
  res.medianUs = timeCall(
      [&](Dispatcher& d, std::uint32_t copy) {
        StepContext ctx{d, workspace, nullptr};
        step.run(ctx, pr.calls[copy]);
      },
      res.copies, samples, &res.batchUs);
  res.minUs = samples.front();
  res.tflops = s.flops() / res.medianUs / 1e6;
  res.kvGBs = s.kvBytes() / res.medianUs / 1e3;
  res.ceiling = s.kind == "decode" ? "read" : "mma";
  if (s.kind == "decode" && ceilings.readGBs) res.percentOfCeiling = 100.0 * res.kvGBs / *ceilings.readGBs;
  if (s.kind == "prefill" && ceilings.mmaTflops) res.percentOfCeiling = 100.0 * res.tflops / *ceilings.mmaTflops;
  for (const auto& k : res.kernels) {
    for (const auto& [name, value] : rt_.pipelines().statistics(k)) res.statistics[k].emplace_back(name, value);
  }
  return res;
}

namespace {
constexpr std::uint32_t kProbeCalls = 10;  ///< probed calls after the warm-up ones
}  // namespace

std::pair<std::vector<std::uint32_t>, std::uint32_t> Runner::probeWords(Prepared& pr, AttentionOptions probing,
                                                                       bool AttentionOptions::*probeKnob) {
  probing.*probeKnob = true;
  FlashAttentionStep step(rt_.info(), rt_.snippets(), probing);
  DeviceWorkspace workspace(rt_);
  const AttentionPlan plan = step.plan(pr.calls[0]);
  const Tensor words = FlashAttentionStep::probeRecords(workspace, plan);
  // The probed call back to back, as the timed runs go (clocks up, code and pipeline resident): a
  // lone call after an idle host round trip spanned up to 4x the timed call on the H200. The
  // records are the last call's; every call writes all of them.
  words.buffer->fill(0u);
  auto d = rt_.dispatcher();
  StepContext ctx{*d, workspace, nullptr};
  const std::uint32_t calls = std::max<std::uint32_t>(options_.warmup, 1) + kProbeCalls;
  for (std::uint32_t c = 0; c < calls; ++c) {
    step.run(ctx, pr.calls[c % pr.calls.size()]);
    d->barrier();
  }
  d->submit();
  std::vector<std::uint32_t> w(static_cast<std::size_t>(words.numel()));
  words.buffer->download(std::as_writable_bytes(std::span(w)), words.offset * 4);
  return {std::move(w), plan.probeSubgroups()};
}

probe::Summary Runner::probe(Prepared& pr, const AttentionOptions& knobs) {
  const auto [words, subgroups] = probeWords(pr, knobs, &AttentionOptions::faPrefillProbe);
  return probe::summarize(words, subgroups);
}

probe::DecodeSummary Runner::probeDecode(Prepared& pr, const AttentionOptions& knobs) {
  const auto [words, subgroups] = probeWords(pr, knobs, &AttentionOptions::faDecodeProbe);
  return probe::summarizeDecode(words, subgroups);
}

namespace {

// "a:b:c" as its fields; an empty text is one empty field.
std::vector<std::string> colonFields(const std::string& text) {
  std::vector<std::string> f;
  for (std::size_t start = 0;;) {
    const std::size_t colon = text.find(':', start);
    f.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) return f;
    start = colon + 1;
  }
}

}  // namespace

void Runner::ReadStream::dispatch(Dispatcher& d) const {
  dispatch(d, static_cast<std::uint32_t>((scan.mib << 20) / 16), scan.groups);
}

void Runner::ReadStream::dispatch(Dispatcher& d, std::uint32_t pieces, std::uint32_t groups) const {
  d.dispatch(kernel, Arguments().bind("data", data).bind("sink", sink).set("count", pieces).set("magic", 0x9e3779b9u),
             {groups});
}

Runner::ReadStream Runner::prepareRead(const ReadScan& scan) {
  const Tensor data = rt_.allocate("stream", DType::F32, {static_cast<std::int64_t>((scan.mib << 20) / 4)});
  data.buffer->fill(0x3c003c00u);
  // A workgroup's fold (ReadStreamStage), or one 64 x 64 f32 matrix (CoopMat2ReadStage).
  const Tensor sink = rt_.allocate("sink", DType::F32, {std::max<std::int64_t>(scan.groups, 64 * 64)});
  KernelBuilder b = rt_.builder().workgroup(scan.workgroup);
  if (scan.coopMat2) {
    b.emplace<CoopMat2ReadStage>(scan.loads);
  } else {
    b.emplace<ReadStreamStage>(scan.loads, scan.order, scan.split, scan.sides);
  }
  return {scan, data, sink, b.build()};
}

double Runner::readScan(const ReadScan& scan) {
  const ReadStream stream = prepareRead(scan);
  std::vector<double> samples;
  return timeCall([&](Dispatcher& d, std::uint32_t) { stream.dispatch(d); }, 1, samples);
}

std::string ReadScan::name() const {
  using Order = ReadStreamStage::Order;
  const char* how = coopMat2                  ? ", coopmat2"
                    : order == Order::Blocked ? ", blocked"
                    : order == Order::Ring    ? ", blocked, in a ring"
                                              : "";
  return fmt::format("{} MiB, {} x {}, {} loads{}{}", mib, groups, workgroup, loads, how,
                     split * sides > 1 ? fmt::format(" in {} parts of {} sides", split, sides) : "");
}

ReadScan parseReadScan(const std::string& text) {
  auto fail = [&] {
    return UserError("--read-scan",
                     fmt::format("'{}'; accepted: MIB:GROUPS:WORKGROUP:LOADS[:blocked[:SPLIT:SIDES]|:ring|:cm2], "
                                 "MIB 1 to 4095, GROUPS at least 1, WORKGROUP 1 to 1024, LOADS 1 to 32, "
                                 "SPLIT dividing WORKGROUP, SIDES 1 to 4",
                                 text));
  };
  const std::vector<std::string> f = colonFields(text);
  if (f.size() < 4 || f.size() > 7 || f.size() == 6) throw fail();
  if (f.size() >= 5 && f[4] != "blocked" && f[4] != "ring" && f[4] != "cm2") throw fail();
  if (f.size() == 7 && f[4] != "blocked") throw fail();
  std::uint32_t v[6] = {0, 0, 0, 0, 1, 1};  // MIB, GROUPS, WORKGROUP, LOADS, SPLIT, SIDES
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (i == 4) continue;
    const std::string& field = f[i];
    if (field.empty() || field.size() > 7 || field.find_first_not_of("0123456789") != std::string::npos) throw fail();
    v[i < 4 ? i : i - 1] = static_cast<std::uint32_t>(std::stoul(field));
  }
  if (v[0] < 1 || v[0] > 4095 || v[1] < 1 || v[2] < 1 || v[2] > 1024 || v[3] < 1 || v[3] > 32) throw fail();
  if (v[4] < 1 || v[2] % v[4] != 0 || v[5] < 1 || v[5] > 4) throw fail();
  using Order = ReadStreamStage::Order;
  ReadScan scan{v[0], v[1], v[2], v[3]};
  scan.order = f.size() < 5 ? Order::Grid : f[4] == "ring" ? Order::Ring : Order::Blocked;
  scan.coopMat2 = f.size() >= 5 && f[4] == "cm2";
  scan.split = v[4];
  scan.sides = v[5];
  return scan;
}

Shape parseShape(const std::string& text) {
  std::vector<std::string> f = colonFields(text);
  auto num = [&](std::size_t i) -> std::uint32_t {
    try {
      const unsigned long v = std::stoul(f.at(i));
      if (v == 0 || v > (1u << 24)) throw std::out_of_range("size");
      return static_cast<std::uint32_t>(v);
    } catch (const std::exception&) {
      throw UserError("--shape", fmt::format("'{}': field {} must be a positive integer", text, i + 1));
    }
  };
  std::vector<std::string> mods;
  if (!f.empty()) {
    // The last field carries the modifiers: "128+window4096+sinks".
    std::string& last = f.back();
    for (std::size_t plus = last.find('+'); plus != std::string::npos; plus = last.find('+')) {
      const std::size_t next = last.find('+', plus + 1);
      mods.push_back(last.substr(plus + 1, next == std::string::npos ? std::string::npos : next - plus - 1));
      last.erase(plus, next == std::string::npos ? std::string::npos : next - plus);
    }
  }
  // The modifiers that carry a positive number ("window4096", "softcap50", "pg64"): the characters and
  // the most of them the number may have, and what the modifier sets.
  struct Sized {
    std::string_view name, chars;
    std::size_t most;
    std::string_view sets;
  };
  static constexpr Sized kSized[] = {{"window", "0123456789", 8, "the window"},
                                     {"softcap", "0123456789.", 16, "the soft cap"},
                                     {"pg", "0123456789", 4, "the page size"}};
  const auto sizedOf = [](const std::string& m) -> const Sized* {
    const auto s =
        std::find_if(std::begin(kSized), std::end(kSized), [&](const Sized& x) { return m.starts_with(x.name); });
    return s == std::end(kSized) ? nullptr : s;
  };
  // Two modifiers that set one thing (two windows, int8 and q8_0) cannot both hold.
  const auto sets = [&](const std::string& m) -> std::string {
    if (m == "int8" || m == "q8_0") return "the cache's format";
    return sizedOf(m) ? std::string(sizedOf(m)->sets) : m;
  };
  for (std::size_t i = 0; i < mods.size(); ++i) {
    const std::string& m = mods[i];
    const Sized* s = sizedOf(m);
    const std::string number = s ? m.substr(s->name.size()) : "";
    char* end = nullptr;
    const bool sized = s && !number.empty() && number.size() <= s->most &&
                       number.find_first_not_of(s->chars) == std::string::npos &&
                       std::strtod(number.c_str(), &end) > 0 && *end == '\0';
    if (!sized && m != "alibi" && m != "sinks" && m != "bf16" && m != "kvtok" && m != "int8" && m != "q8_0") {
      throw UserError("--shape", fmt::format("'{}': modifier '{}'; accepted: {}", text, m, kShapeModifiers));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (sets(mods[j]) == sets(m)) {
        throw UserError("--shape", fmt::format("'{}': +{} and +{} both set {}; accepted: one modifier of a kind", text,
                                               mods[j], m, sets(m)));
      }
    }
  }
  if (f.size() != 6 || (f[0] != "decode" && f[0] != "prefill")) {
    throw UserError("--shape", fmt::format("'{}'; accepted: decode:B:Hq:Hkv:kv:D or prefill:B:Hq:Hkv:S:D, each "
                                           "optionally followed by {}", text, kShapeModifiers));
  }
  Shape s;
  s.kind = f[0];
  s.batch = num(1);
  s.heads = num(2);
  s.kvHeads = num(3);
  s.kvLen = num(4);
  s.qLen = s.kind == "decode" ? 1 : s.kvLen;
  s.headDim = num(5);
  s.causal = s.kind == "prefill";
  s.modifiers = mods;
  for (const std::string& why :
       {headGroupProblem(s.heads, s.kvHeads, "Hq", "Hkv"), pageSizeProblem(s.pageSize(), s.cacheType())}) {
    if (!why.empty()) throw UserError("--shape", fmt::format("'{}': {}", text, why));
  }
  return s;
}

std::vector<std::pair<std::string, AttentionOptions>> sweepVariants(const Shape& s, const AttentionOptions& base,
                                                                  const DeviceInfo& device) {
  std::vector<std::pair<std::string, AttentionOptions>> out;
  out.emplace_back("auto", base);
  const std::uint32_t sg = device.subgroupSize;
  if (s.kind == "decode") {
    // Lanes per key, load width and loads in flight: every usable combination (the width the
    // Selector would pick for a split is one of them, so head dims whose best split needs a narrower
    // load show up too).
    // Fewer query heads per workgroup too (half the group's, and 1): fewer q and output registers, each
    // K/V row read by more workgroups.
    const std::uint32_t group = s.heads / s.kvHeads, groupHeads = Selector::decodeHeadsPerWorkgroup(group);
    std::vector<std::uint32_t> headChoices = {groupHeads};
    for (std::uint32_t h = groupHeads / 2; h >= 1 && groupHeads > 1; h /= 2) {
      if (group % h == 0) headChoices.push_back(h);
    }
    // And q read from shared memory ("qs"), which leaves registers to up to 16 steps in flight, and
    // int8 or q8_0 K through integer dot products ("idot"), lane clusters wider than the row with
    // some lanes idle ("il": usable only where the row leaves lanes idle), and whole loads then words
    // ("tw": 16-bit rows whose lanes' shares are not whole loads), and scores summed once per key
    // and weighed by one lane group each ("sc").
    for (const char* mode :
         {"", " qs", " idot", " il", " il qs", " tw", " tw qs", " sc", " qs sc", " idot sc", " tw sc", " tw qs sc"}) {
      const std::string_view m = mode;
      const bool qs = m.find(" qs") != std::string_view::npos, idot = m.starts_with(" idot");
      const bool idle = m.starts_with(" il"), tail = m.starts_with(" tw"), scatter = m.ends_with(" sc");
      if (idot && !(quantized(s.cacheType()) && device.int8Dot)) continue;
      for (std::uint32_t heads : headChoices) {
        for (std::uint32_t warps : {4u, 8u}) {
          for (std::uint32_t keys = 1; keys <= std::min(sg, 8u); keys *= 2) {
            for (std::uint32_t vec : {2u, 4u, 8u, 16u}) {
              for (std::uint32_t unroll : {2u, 4u, 8u, 16u}) {
                DecodeVariant v;
                v.headDim = s.headDim;
                v.dtype = s.cacheType();
                v.strideAlign = storageFormat(v.dtype).maxLoadWidth;
                v.heads = heads;
                v.keysPerWarp = keys;
                v.vecWidth = vec;
                v.unroll = unroll;
                v.queryShared = qs;
                v.int8Dot = idot;
                v.idleLanes = idle;
                v.tailWords = tail;
                v.scatter = scatter;
                if (!v.unusableReason(sg).empty()) continue;
                AttentionOptions o = base;
                o.faDecodeWarps = warps;
                o.faDecodeKeysPerWarp = keys;
                o.faDecodeVectorWidth = vec;
                o.faDecodeUnroll = unroll;
                o.faDecodeQueryShared = qs ? Force::On : Force::Off;
                o.faDecodeInt8Dot = idot ? Force::On : Force::Off;
                o.faDecodeIdleLanes = idle ? Force::On : Force::Off;
                o.faDecodeTailWords = tail ? Force::On : Force::Off;
                o.faDecodeScatter = scatter ? Force::On : Force::Off;
                if (heads != groupHeads) o.faDecodeHeads = heads;
                out.emplace_back(fmt::format("w{} k{} v{} u{}{}{}", warps, keys, vec, unroll,
                                             heads != groupHeads ? fmt::format(" h{}", heads) : "", mode),
                                 o);
              }
            }
          }
        }
      }
    }
    for (std::uint32_t splits : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u}) {
      AttentionOptions o = base;
      o.faDecodeSplitK = splits;
      out.emplace_back(fmt::format("split {}", splits), o);
    }
    AttentionOptions separate = base;
    separate.faDecodeFusedReduce = Force::Off;
    out.emplace_back("reduce kernel", separate);
    AttentionOptions scalar = base;
    scalar.faDecodeScalar = true;
    out.emplace_back("scalar", scalar);
  } else {
    const bool coop = device.hasCoopMat({16, 16, 16, DType::F16, DType::F32});
    for (std::uint32_t warps : {2u, 4u, 8u}) {
      AttentionOptions o = base;
      o.faPrefillWarps = warps;
      o.faPrefillCoopMat = Force::Off;
      out.emplace_back(fmt::format("w{} subgroup", warps), o);
      if (!coop) continue;
      o.faPrefillCoopMat = Force::On;
      for (Force reg : {Force::Off, Force::On}) {
        if (reg == Force::On && !device.coopMatLayout.quad()) continue;
        o.faPrefillRegisterSoftmax = reg;
        out.emplace_back(fmt::format("w{} coopmat {} softmax", warps, reg == Force::On ? "register" : "shared"), o);
      }
    }
    for (std::uint32_t keys : {32u, 64u}) {
      for (std::uint32_t warps : {4u, 8u}) {
        if (!coop) break;
        AttentionOptions o = base;
        o.faPrefillCoopMat = Force::On;
        o.faPrefillWarps = warps;
        o.faPrefillKeysPerTile = keys;
        out.emplace_back(fmt::format("w{} coopmat bc{}", warps, keys), o);
      }
    }
    for (std::uint32_t splits : {2u, 4u}) {
      AttentionOptions o = base;
      o.faPrefillSplitK = splits;
      out.emplace_back(fmt::format("split {}", splits), o);
    }
  }
  return out;
}

namespace {
// A value that was not measured or does not apply is null, never 0.
nlohmann::json orNull(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
}  // namespace

namespace {

nlohmann::json probeJson(const std::optional<probe::Summary>& p) {
  if (!p) return nullptr;
  nlohmann::json phases;
  for (std::size_t i = 0; i < p->phaseShare.size(); ++i) phases[probe::phaseNames()[i]] = p->phaseShare[i];
  return {{"workgroups", p->workgroups},     {"sms", p->sms},         {"max_resident", p->maxResident},
          {"mean_resident", p->meanResident}, {"sm_busy", p->smBusy},  {"span_ticks", p->spanTicks},
          {"workgroup_ticks", p->workgroupTicks}, {"cycles_per_tick", p->cyclesPerTick}, {"phase_share", phases}};
}

nlohmann::json decodeProbeJson(const std::optional<probe::DecodeSummary>& p) {
  if (!p) return nullptr;
  return {{"workgroups", p->workgroups}, {"merged", p->merged},   {"span_ticks", p->spanTicks},
          {"start_spread", p->startSpread}, {"setup", p->setup}, {"stream", p->stream},
          {"stream_end_spread", p->streamEndSpread}, {"hand_over", p->handOver}, {"merge", p->merge},
          {"tail", p->tail}};
}

}  // namespace

nlohmann::json toJson(const Result& r) {
  return {{"kind", r.shape.kind},       {"name", r.shape.name()},      {"B", r.shape.batch},
          {"Hq", r.shape.heads},        {"Hkv", r.shape.kvHeads},      {"Sq", r.shape.qLen},
          {"Skv", r.shape.kvLen},       {"D", r.shape.headDim},        {"causal", r.shape.causal},
          {"us", r.medianUs},           {"min_us", r.minUs},           {"batch_us", r.batchUs},           {"tflops", r.tflops},
          {"kv_gbs", r.kvGBs},          {"pct_ceiling", orNull(r.percentOfCeiling)}, {"ceiling", r.ceiling}, {"rel_error", r.relError},
          {"variant", r.variant},       {"modifiers", r.shape.modifiers},
          {"checked", r.checked},       {"copies", r.copies},          {"kernels", r.kernels},
          {"plan", r.plan},             {"statistics", r.statistics},  {"probe", probeJson(r.probe)},
          {"decode_probe", decodeProbeJson(r.decodeProbe)}};
}

nlohmann::json toJson(const Ceilings& c) {
  return {{"read_gbs", orNull(c.readGBs)},
          {"mma_tflops", orNull(c.mmaTflops)},
          {"empty_dispatch_us", c.emptyDispatchUs},
          {"dependent_pair_us", c.dependentPairUs}};
}

}  // namespace foundry::bench
