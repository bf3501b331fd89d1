// Times llama.cpp's flash attention (ggml_flash_attn_ext on ggml's Vulkan backend) the way
// `foundry bench` times Foundry's kernels (bench/BenchSuite.h): the same shapes, inputs and check, GPU
// time per call from timestamps, calls back to back after a warm-up, a cold L2.
//
// GPU time comes from ggml's own per-op timer (GGML_VK_PERF_LOGGER): a timestamp after each node of a
// graph, a barrier after each, the mean per op printed to stderr after each graph; the harness
// captures stderr and reads the attention op's line. A timed graph is a batch of calls on rotating
// input copies (about 5 ms of them, as BenchSuite batches its calls) followed by a chain of
// one-element scales; the median over graphs of each graph's mean is reported. Two details keep every
// call's interval inside one command buffer, so no interval spans a submit and the host's time between
// two buffers (ggml writes a node's closing timestamp after it submits at that node):
// - ggml submits early once a graph's FLOPs pass 1/40 of the previous graph's, so before each timed
//   graph the harness computes one without FLOPs (a scale), and the rule is off for the next graph;
// - ggml submits early once fewer than a fifth of a graph's nodes remain, so the scale chain is long
//   enough that this falls on it.
//
// Output: one JSON line per shape on stdout (the keys torch_sdpa.py writes, with lib "ggml"); a
// readable line per shape on stderr. Exit status 1 when a shape fails its check, 2 on bad input.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-vulkan.h"
#include "ggml.h"
#include "foundry/steps/OutputComparison.h"

namespace {

/// A shape in `foundry bench --shape` terms: decode is one query against kvLen keys, prefill is causal
/// with qLen == kvLen; head-major Q and K/V, fp16 K/V.
struct Shape {
  std::string kind;
  std::uint32_t batch = 1, heads = 32, kvHeads = 8, qLen = 1, kvLen = 1024, headDim = 128;
  bool causal = false;
  std::string name() const {
    if (kind == "decode") return fmt::format("decode B{} D{} kv{}", batch, headDim, kvLen);
    return fmt::format("prefill B{} D{} S{}{}", batch, headDim, qLen, causal ? " causal" : "");
  }
  /// As Foundry's bench counts them: a causal prefill counts half of the (query, key) pairs.
  double flops() const {
    return 4.0 * batch * heads * qLen * double(kvLen) * headDim * (causal && qLen == kvLen ? 0.5 : 1.0);
  }
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Shape makeShape(const std::string& kind, std::uint32_t b, std::uint32_t hq, std::uint32_t hkv, std::uint32_t kv,
                std::uint32_t d) {
  Shape s{kind, b, hq, hkv, kind == "decode" ? 1u : kv, kv, d, kind == "prefill"};
  if (hq % hkv != 0) throw UsageError(fmt::format("{}: Hq {} is not a multiple of Hkv {}", s.name(), hq, hkv));
  if (d % 8 != 0) throw UsageError(fmt::format("{}: D {} is not a multiple of 8 (ggml's Vulkan attention)", s.name(), d));
  return s;
}

/// "decode:B:Hq:Hkv:kv:D" or "prefill:B:Hq:Hkv:S:D", as `foundry bench --shape` takes them (no modifiers).
Shape parseShape(const std::string& text) {
  std::vector<std::string> f;
  for (std::size_t start = 0;;) {
    const std::size_t colon = text.find(':', start);
    f.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (f.size() != 6 || (f[0] != "decode" && f[0] != "prefill")) {
    throw UsageError(fmt::format("--shape '{}'; accepted: decode:B:Hq:Hkv:kv:D or prefill:B:Hq:Hkv:S:D", text));
  }
  std::uint32_t n[6] = {};
  for (std::size_t i = 1; i < 6; ++i) {
    const bool digits = !f[i].empty() && f[i].size() < 9 && f[i].find_first_not_of("0123456789") == std::string::npos;
    n[i] = digits ? static_cast<std::uint32_t>(std::stoul(f[i])) : 0;
    if (n[i] == 0) throw UsageError(fmt::format("--shape '{}': field {} must be a positive integer", text, i + 1));
  }
  return makeShape(f[0], n[1], n[2], n[3], n[4], n[5]);
}

/// The shapes of a `foundry bench --json` file, so both libraries time the same list; shapes with
/// modifiers are left out (ggml's op has none of Foundry's in this harness).
std::vector<Shape> shapesFrom(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--shapes-from '{}': cannot be read", path));
  const nlohmann::json bench = nlohmann::json::parse(in);
  std::vector<Shape> out;
  for (const auto& r : bench.at("results")) {
    if (!r.value("modifiers", nlohmann::json::array()).empty() || !r.value("variant", std::string()).empty()) continue;
    const std::string kind = r.at("kind");
    if (kind == "prefill" && !r.at("causal").get<bool>()) continue;
    out.push_back(makeShape(kind, r.at("B"), r.at("Hq"), r.at("Hkv"), r.at("Skv"), r.at("D")));
  }
  if (out.empty()) throw UsageError(fmt::format("--shapes-from '{}': no results without modifiers", path));
  return out;
}

struct Options {
  std::vector<Shape> shapes;
  std::uint32_t runs = 20, warmup = 5, checkRows = 48;  // BenchSuite.h's defaults
  double warmupMicros = 500000, warmupSeconds = 1.0, minTimedMicros = 50000;
  std::uint64_t l2Bytes = 64ull << 20;
  double scaleError = 1.0;  ///< the scale given to ggml is off by this factor: a negative control
  std::uint32_t calls = 0;   ///< calls per timed graph; 0: about 5 ms of them, 1 to 64
};

/// Redirects file descriptor 2 into a temporary file while alive; `take()` returns what was written
/// since the last call. ggml's op timer writes to std::cerr, which is unbuffered.
class StderrCapture {
 public:
  StderrCapture() : saved_(::dup(2)), file_(std::tmpfile()) {
    if (saved_ < 0 || !file_) throw std::runtime_error("cannot capture stderr");
    std::cerr.flush();
    std::fflush(stderr);
    ::dup2(::fileno(file_), 2);
  }
  ~StderrCapture() {
    std::cerr.flush();
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    std::fclose(file_);
  }
  std::string take() {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::pread(::fileno(file_), buf, sizeof buf, offset_)) > 0; offset_ += n) text.append(buf, n);
    return text;
  }
  int original() const { return saved_; }

 private:
  int saved_;
  std::FILE* file_;
  off_t offset_ = 0;
};

/// The attention calls' mean and total GPU time in microseconds from one graph's timer report
/// ("FLASH_ATTN_EXT dst(...), ...: 8 x 41.2 us = 329.6 us ..."); other ops' lines are skipped.
std::pair<double, double> attentionMicros(const std::string& report) {
  std::size_t at = 0;
  for (std::size_t end; (end = report.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string line = report.substr(at, end - at);
    if (!line.starts_with("FLASH_ATTN_EXT")) continue;
    unsigned count = 0;
    double mean = 0, total = 0;
    const std::size_t colon = line.rfind("): ");
    if (colon == std::string::npos ||
        std::sscanf(line.c_str() + colon + 3, "%u x %lf us = %lf us", &count, &mean, &total) != 3 || count == 0) {
      throw std::runtime_error("unexpected ggml timer line: " + line);
    }
    return {mean, total};
  }
  throw std::runtime_error("no FLASH_ATTN_EXT line in ggml's timer report:\n" + report);
}

std::vector<float> randomValues(std::size_t n, std::uint32_t seed) {
  // BenchSuite's inputs: uniform in [-1, 1], rounded to f16 (so Q, which ggml takes as f32, holds
  // the values Foundry's f16 Q holds).
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = ggml_fp16_to_fp32(ggml_fp32_to_fp16(dist(gen)));
  return v;
}

std::vector<ggml_fp16_t> toHalf(const std::vector<float>& v) {
  std::vector<ggml_fp16_t> h(v.size());
  ggml_fp32_to_fp16_row(v.data(), h.data(), static_cast<std::int64_t>(v.size()));
  return h;
}

/// One output row in float64: query i of head h, batch b; head-major q [B, Hq, Sq, D], k/v [B, Hkv, Skv, D].
std::vector<double> referenceRow(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, std::uint32_t b, std::uint32_t h, std::uint32_t i) {
  const std::uint32_t d = s.headDim, kvh = h / (s.heads / s.kvHeads);
  const std::uint32_t visible = s.causal ? s.kvLen - s.qLen + i + 1 : s.kvLen;
  const float* qr = &q[((std::size_t(b) * s.heads + h) * s.qLen + i) * d];
  const std::size_t kvBase = (std::size_t(b) * s.kvHeads + kvh) * s.kvLen * d;
  std::vector<double> p(visible);
  double top = -1e300;
  for (std::uint32_t j = 0; j < visible; ++j) {
    double dot = 0;
    for (std::uint32_t e = 0; e < d; ++e) dot += double(qr[e]) * k[kvBase + std::size_t(j) * d + e];
    p[j] = dot / std::sqrt(double(d));
    top = std::max(top, p[j]);
  }
  double sum = 0;
  for (auto& x : p) sum += (x = std::exp(x - top));
  std::vector<double> out(d, 0.0);
  for (std::uint32_t j = 0; j < visible; ++j) {
    for (std::uint32_t e = 0; e < d; ++e) out[e] += p[j] / sum * v[kvBase + std::size_t(j) * d + e];
  }
  return out;
}

struct Result {
  double medianUs = 0, minUs = 0, relError = 0;
  bool checked = false;
  std::uint32_t copies = 0, callsPerGraph = 0, graphs = 0;
};

/// One shape's inputs on the backend: copies to rotate over (together more than four times the L2, as
/// BenchSuite's), the causal mask, and the host values for the check.
struct Inputs {
  Shape shape;
  std::vector<float> q, k, v;
  std::vector<ggml_tensor*> qs, ks, vs;
  ggml_tensor* mask = nullptr;
  float scale = 0;
};

/// A ggml context and the backend buffer holding its tensors, freed together.
class Arena {
 public:
  explicit Arena(std::size_t tensors) {
    ggml_init_params params{ggml_tensor_overhead() * tensors + ggml_graph_overhead_custom(kGraphSize, false) * tensors,
                            nullptr, true};
    ctx_ = ggml_init(params);
  }
  ~Arena() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    ggml_free(ctx_);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ggml_context* ctx() const { return ctx_; }
  /// Places every tensor made so far on the backend.
  void allocate(ggml_backend_t backend, const std::string& what) {
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend);
    if (!buffer_) throw std::runtime_error("ggml could not allocate " + what);
  }
  static constexpr std::size_t kGraphSize = 256;

 private:
  ggml_context* ctx_ = nullptr;
  ggml_backend_buffer_t buffer_ = nullptr;
};

/// `calls` attention calls on consecutive copies from `first` (each with its own output), then a chain
/// of one-element scales long enough that ggml's "almost ready" early submit (once fewer than a fifth
/// of the nodes remain) falls on the chain, so every call's closing timestamp is in the graph's one
/// command buffer. Outputs of the calls are returned in `outs`.
ggml_cgraph* attentionGraph(ggml_context* ctx, const Inputs& in, std::uint32_t first, std::uint32_t calls,
                            std::vector<ggml_tensor*>& outs) {
  ggml_cgraph* g = ggml_new_graph_custom(ctx, Arena::kGraphSize, false);
  outs.clear();
  for (std::uint32_t j = 0; j < calls; ++j) {
    const std::size_t c = (first + j) % in.qs.size();
    ggml_tensor* o = ggml_flash_attn_ext(ctx, in.qs[c], in.ks[c], in.vs[c], in.mask, in.scale, 0.0f, 0.0f);
    ggml_prec_set_acc(o, GGML_PREC_F32);  // as llama.cpp asks for it
    ggml_build_forward_expand(g, o);
    outs.push_back(o);
  }
  ggml_tensor* tail = ggml_view_1d(ctx, outs.back(), 1, 0);
  for (std::uint32_t t = 0; t < calls / 4 + 1; ++t) tail = ggml_scale(ctx, tail, 1.0f);
  ggml_build_forward_expand(g, tail);
  return g;
}

class Bench {
 public:
  Bench(ggml_backend_t backend, const Options& o, StderrCapture& capture)
      : backend_(backend), o_(o), capture_(capture), idle_(4) {
    ggml_tensor* x = ggml_new_tensor_1d(idle_.ctx(), GGML_TYPE_F32, 1);
    noFlops_ = ggml_new_graph_custom(idle_.ctx(), Arena::kGraphSize, false);
    ggml_build_forward_expand(noFlops_, ggml_scale(idle_.ctx(), x, 1.0f));
    idle_.allocate(backend_, "a one-element tensor");
    ggml_backend_tensor_memset(x, 0, 0, ggml_nbytes(x));
  }

  Result run(const Shape& s) {
    Inputs in;
    in.shape = s;
    in.scale = float(1.0 / std::sqrt(double(s.headDim)) * o_.scaleError);
    const std::size_t qN = std::size_t(s.batch) * s.heads * s.qLen * s.headDim;
    const std::size_t kvN = std::size_t(s.batch) * s.kvHeads * s.kvLen * s.headDim;
    in.q = randomValues(qN, 11);
    in.k = randomValues(kvN, 12);
    in.v = randomValues(kvN, 13);
    const double setBytes = 4.0 * qN + 2.0 * 2.0 * kvN;  // Q is f32 here
    const auto copies = static_cast<std::uint32_t>(std::clamp(std::ceil(4.0 * o_.l2Bytes / setBytes) + 1, 1.0, 64.0));

    Arena inputs(3 * copies + 8);
    ggml_context* ctx = inputs.ctx();
    // The causal mask as llama.cpp builds it: [Skv, Sq] f16, 0 where visible and -inf elsewhere, one
    // for all heads and calls (a model shares it across layers).
    if (s.causal) in.mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, s.kvLen, s.qLen, 1, 1);
    for (std::uint32_t c = 0; c < copies; ++c) {
      in.qs.push_back(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.headDim, s.qLen, s.heads, s.batch));
      in.ks.push_back(ggml_new_tensor_4d(ctx, GGML_TYPE_F16, s.headDim, s.kvLen, s.kvHeads, s.batch));
      in.vs.push_back(ggml_new_tensor_4d(ctx, GGML_TYPE_F16, s.headDim, s.kvLen, s.kvHeads, s.batch));
    }
    std::vector<ggml_tensor*> checkOut;
    ggml_cgraph* single = attentionGraph(ctx, in, 0, 1, checkOut);
    inputs.allocate(backend_, fmt::format("{} copies of the inputs of {}", copies, s.name()));
    upload(in);

    Result r;
    r.copies = copies;
    // Correctness first: copy 0's output poisoned with NaN, then sampled rows against float64.
    ggml_backend_tensor_memset(checkOut[0], 0xff, 0, ggml_nbytes(checkOut[0]));
    double estimate = time(single).first;
    check(in, checkOut[0], r);
    // A first estimate from single calls (a quarter second at most), to size the timed graphs.
    for (const auto started = now(); seconds(started) < std::min(0.25, o_.warmupSeconds);) {
      estimate = std::min(estimate, time(single).first);
    }

    // Timed graphs as BenchSuite::timeCall's batches: calls back to back with a barrier between, about
    // 5 ms of them (1 to 64), rotating over the copies; enough graphs that every copy is used.
    const std::uint32_t calls =
        o_.calls ? o_.calls : std::clamp<std::uint32_t>(std::uint32_t(5000.0 / std::max(estimate, 1.0)), 1, 64);
    const std::uint32_t graphCount = (copies + calls - 1) / calls;
    Arena timedArena(std::size_t(graphCount) * (calls + calls / 4 + 4) + 4);
    std::vector<ggml_cgraph*> graphs;
    std::vector<ggml_tensor*> outs;
    for (std::uint32_t g = 0; g < graphCount; ++g) graphs.push_back(attentionGraph(timedArena.ctx(), in, g * calls, calls, outs));
    timedArena.allocate(backend_, fmt::format("{} outputs of {}", graphCount * calls, s.name()));
    r.callsPerGraph = calls;

    // Warm-up: at least `warmup` calls, 0.5 s of GPU time and 1 s; then at least `runs` graphs and
    // 50 ms of GPU time. Each graph gives the mean of its calls; the median of those is reported.
    std::uint32_t next = 0, warmed = 0;
    double busy = 0;
    for (const auto started = now(); warmed < o_.warmup || busy < o_.warmupMicros || seconds(started) < o_.warmupSeconds;) {
      busy += time(graphs[next++ % graphCount]).second;
      warmed += calls;
    }
    std::vector<double> means;
    double measured = 0;
    while (means.size() < o_.runs || measured < o_.minTimedMicros) {
      const auto [mean, total] = time(graphs[next++ % graphCount]);
      means.push_back(mean);
      measured += total;
    }
    std::sort(means.begin(), means.end());
    r.medianUs = means[means.size() / 2];
    r.minUs = means.front();
    r.graphs = static_cast<std::uint32_t>(means.size());
    return r;
  }

 private:
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }
  static double seconds(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(now() - since).count();
  }

  void upload(const Inputs& in) {
    const Shape& s = in.shape;
    const std::vector<ggml_fp16_t> kh = toHalf(in.k), vh = toHalf(in.v);
    for (std::size_t c = 0; c < in.qs.size(); ++c) {
      ggml_backend_tensor_set(in.qs[c], in.q.data(), 0, ggml_nbytes(in.qs[c]));
      ggml_backend_tensor_set(in.ks[c], kh.data(), 0, ggml_nbytes(in.ks[c]));
      ggml_backend_tensor_set(in.vs[c], vh.data(), 0, ggml_nbytes(in.vs[c]));
    }
    if (in.mask) {
      const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), hidden = ggml_fp32_to_fp16(-INFINITY);
      std::vector<ggml_fp16_t> m(std::size_t(s.kvLen) * s.qLen);
      for (std::uint32_t i = 0; i < s.qLen; ++i) {
        for (std::uint32_t j = 0; j < s.kvLen; ++j) m[std::size_t(i) * s.kvLen + j] = j <= s.kvLen - s.qLen + i ? zero : hidden;
      }
      ggml_backend_tensor_set(in.mask, m.data(), 0, ggml_nbytes(in.mask));
    }
  }

  /// Sampled rows (BenchSuite's: the same generator, so the same rows) against the float64 reference.
  void check(const Inputs& in, ggml_tensor* out, Result& r) const {
    const Shape& s = in.shape;
    std::mt19937 gen(7);
    std::vector<float> got, row(s.headDim);
    std::vector<double> want;
    for (std::uint32_t n = 0; n < o_.checkRows; ++n) {
      const std::uint32_t b = gen() % s.batch, h = gen() % s.heads;
      const std::uint32_t i = n == 0 ? s.qLen - 1 : gen() % s.qLen;
      // ggml's result is [D, Hq, Sq, B]: token-major.
      const std::size_t at = ((std::size_t(b) * s.qLen + i) * s.heads + h) * s.headDim;
      ggml_backend_tensor_get(out, row.data(), at * sizeof(float), s.headDim * sizeof(float));
      got.insert(got.end(), row.begin(), row.end());
      const auto ref = referenceRow(s, in.q, in.k, in.v, b, h, i);
      want.insert(want.end(), ref.begin(), ref.end());
    }
    const foundry::ErrorStats e = foundry::compareOutputs(got, want);
    r.relError = e.reportedRel();
    r.checked = e.passes(3e-3);  // BenchSuite's bound
  }

  /// Runs a graph after the graph without FLOPs; returns the mean and the total of its attention calls' GPU times.
  std::pair<double, double> time(ggml_cgraph* g) {
    compute(noFlops_);
    capture_.take();
    compute(g);
    return attentionMicros(capture_.take());
  }

  void compute(ggml_cgraph* g) {
    if (ggml_backend_graph_compute(backend_, g) != GGML_STATUS_SUCCESS) throw std::runtime_error("ggml graph compute failed");
  }
  ggml_backend_t backend_;
  const Options& o_;
  StderrCapture& capture_;
  Arena idle_;
  ggml_cgraph* noFlops_ = nullptr;
};

Options parseArgs(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", argv[i]));
    return argv[++i];
  };
  auto number = [&](int& i) {
    const std::string flag = argv[i], text = value(i);
    try {
      std::size_t used = 0;
      const double x = std::stod(text, &used);
      if (used == text.size() && x >= 0) return x;
    } catch (const std::exception&) {
    }
    throw UsageError(fmt::format("{} '{}': accepted: a number >= 0", flag, text));
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shape") {
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) o.shapes.push_back(parseShape(argv[++i]));
    } else if (a == "--shapes-from") {
      for (auto& s : shapesFrom(value(i))) o.shapes.push_back(s);
    } else if (a == "--runs") {
      o.runs = static_cast<std::uint32_t>(std::max(1.0, number(i)));
    } else if (a == "--warmup") {
      o.warmup = static_cast<std::uint32_t>(number(i));
    } else if (a == "--warmup-seconds") {  // and half of it in GPU time, as BenchSuite's 1 s and 0.5 s
      o.warmupSeconds = number(i);
      o.warmupMicros = o.warmupSeconds * 5e5;
    } else if (a == "--min-timed-us") {
      o.minTimedMicros = number(i);
    } else if (a == "--l2-mib") {
      o.l2Bytes = static_cast<std::uint64_t>(number(i)) << 20;
    } else if (a == "--calls") {
      o.calls = static_cast<std::uint32_t>(std::clamp(number(i), 1.0, 64.0));
    } else if (a == "--scale-error") {
      o.scaleError = number(i);
    } else {
      throw UsageError(fmt::format("unknown argument '{}'; accepted: --shape SHAPE..., --shapes-from BENCH_JSON, --runs N, "
                                   "--warmup N, --warmup-seconds S, --min-timed-us US, --l2-mib N, --calls N, --scale-error F",
                                   a));
    }
  }
  if (o.shapes.empty()) throw UsageError("no shapes: give --shape SHAPE... or --shapes-from BENCH_JSON");
  return o;
}

std::string ggmlLog;  // what ggml logged, to find the device line in
int realStderr = 2;   // the terminal's stderr while fd 2 is captured

void say(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parseArgs(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ggml_fa_bench: {}\n", e.what());
    return 2;
  }
  // ggml's per-op GPU timer, reported after every graph; read when the Vulkan instance is created.
  ::setenv("GGML_VK_PERF_LOGGER", "1", 1);
  ::setenv("GGML_VK_PERF_LOGGER_FREQUENCY", "1", 1);
  ::unsetenv("GGML_VK_PERF_LOGGER_CONCURRENT");
  ggml_log_set([](ggml_log_level, const char* text, void*) { ggmlLog += text; }, nullptr);
  // A failed GGML_ASSERT aborts; its message must reach the terminal even while stderr is captured.
  ggml_set_abort_callback([](const char* message) { say(realStderr, fmt::format("ggml_fa_bench: ggml: {}\n", message)); });
  ggml_backend_t backend = ggml_backend_vk_get_device_count() > 0 ? ggml_backend_vk_init(0) : nullptr;
  if (!backend) {
    fmt::print(stderr, "ggml_fa_bench: ggml found no Vulkan device (it skips CPU devices such as lavapipe unless "
                       "GGML_VK_VISIBLE_DEVICES names them)\n{}", ggmlLog);
    return 2;
  }
  std::string device;
  if (const std::size_t at = ggmlLog.find("ggml_vulkan: 0 = "); at != std::string::npos) {
    device = ggmlLog.substr(at + 17, ggmlLog.find('\n', at) - at - 17);
  }
  bool allChecked = true;
  int status = 0;
  {
    StderrCapture capture;
    realStderr = capture.original();
    Bench bench(backend, o, capture);
    for (const Shape& s : o.shapes) {
      Result r;
      try {
        r = bench.run(s);
      } catch (const std::exception& e) {
        // What ggml wrote to stderr meanwhile (its own errors among it) goes out with the message.
        say(capture.original(), fmt::format("{}ggml_fa_bench: {}: {}\n", capture.take(), s.name(), e.what()));
        status = 1;
        break;
      }
      allChecked &= r.checked;
      const nlohmann::json line = {
          {"lib", "ggml"},        {"ggml", GGML_FA_BENCH_VERSION}, {"kind", s.kind},      {"name", s.name()},
          {"B", s.batch},         {"Hq", s.heads},                 {"Hkv", s.kvHeads},    {"Sq", s.qLen},
          {"Skv", s.kvLen},       {"D", s.headDim},                {"causal", s.causal},  {"us", r.medianUs},
          {"min_us", r.minUs},    {"tflops", s.flops() / r.medianUs / 1e6},             {"graphs", r.graphs},
          {"calls_per_graph", r.callsPerGraph}, {"copies", r.copies},   {"rel_error", r.relError},       {"checked", r.checked}, {"device", device},
          {"timing", "GGML_VK_PERF_LOGGER"}};
      fmt::print("{}\n", line.dump());
      std::fflush(stdout);
      const std::string summary = fmt::format("ggml {}: {:.1f} us (min {:.1f}; {} graphs of {} calls; {} copies), check {} {:.1e}\n",
                                              s.name(), r.medianUs, r.minUs, r.graphs, r.callsPerGraph, r.copies,
                                              r.checked ? "ok" : "FAIL", r.relError);
      say(capture.original(), summary);
    }
  }
  ggml_backend_free(backend);
  if (status == 0 && !allChecked) {
    fmt::print(stderr, "ggml_fa_bench: check failed: an output did not match the float64 reference\n");
    status = 1;
  }
  return status;
}
