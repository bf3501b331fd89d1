#include "foundry/runner/Session.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/FileIdentity.h"
#include "foundry/KvQuant.h"
#include "foundry/MemoryBudget.h"
#include "foundry/Random.h"
#include "foundry/Runtime.h"
#include "foundry/runner/LayerModifiers.h"
#include "foundry/runner/RankedAttention.h"
#include "foundry/runner/RunMemory.h"
#include "foundry/runner/io/Safetensors.h"
#include "foundry/stages/TokenCopyStage.h"
#include "foundry/stages/modifiers/KeyLengthsStage.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/RandomFill.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/steps/SdpaReferenceStep.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/Device.h"
#include "foundry/vk/PipelineCache.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

// About six units of rounding of the storage type (bf16 keeps 8 bits, f16 11).
double defaultTolerance(DType dtype) {
  if (quantized(dtype)) return kQuantizedAttentionBound;  // against the values before quantization
  return dtype == DType::F32 ? 1e-4 : dtype == DType::BF16 ? 1.2e-2 : 3e-3;
}

namespace {

using Clock = std::chrono::steady_clock;

std::uint32_t seedFor(std::uint64_t runSeed, std::uint32_t layer, std::uint32_t kind) {
  const auto folded = static_cast<std::uint32_t>(runSeed ^ (runSeed >> 32));
  return randomHash(folded ^ randomHash(layer * 3u + kind + 1u));
}

/// A token-major view of tokens [t0, t0 + n) of a [tokens, batch, heads, D] buffer as [B, n, H, D].
Tensor tokenView(const Tensor& all, std::uint32_t t0, std::uint32_t n) {
  const std::int64_t tokens = all.dim(0), batch = all.dim(1), heads = all.dim(2), d = all.dim(3);
  (void)tokens;
  Tensor v = all;
  v.dims = {batch, n, heads, d};
  v.strides = {heads * d, batch * heads * d, d, 1};
  v.layout = Layout::TokenMajor;
  v.offset = all.offset + static_cast<std::uint64_t>(t0) * batch * heads * d;
  return v;
}

/// Sequence b of a tensor whose leading dim is the batch (a cache, a token view, a block table) as a
/// batch of one; an int8 cache's scales alike.
Tensor sequenceOf(const Tensor& t, std::uint32_t b) {
  Tensor v = t;
  v.dims[0] = 1;
  v.offset += static_cast<std::uint64_t>(b) * t.strides[0];
  if (t.scales) v.scales = std::make_shared<Tensor>(sequenceOf(*t.scales, b));
  return v;
}

struct LayerInputs {
  Tensor q, k, v;  ///< [tokens, batch, heads, D]; v value_dim wide, and absent for latent values
};

class Session {
 public:
  Session(Runtime& rt, const RunRequest& req, Progress& progress)
      : rt_(rt), req_(req), c_(req.config), progress_(progress), flash_(rt.info(), rt.snippets(), req.attention),
        reference_(rt.info(), rt.snippets()), rope_(rt.info(), rt.snippets()), append_(rt.info(), rt.snippets()),
        workspace_(rt) {
    B_ = c_.run.batch;
    P_ = c_.run.promptLen;
    N_ = c_.run.decodeTokens;
    T_ = P_ + N_;
    L_ = c_.run.layers;
    dtype_ = c_.run.dtype;
    kvDtype_ = c_.run.cacheType();
    ragged_ = !c_.run.promptLens.empty();
    D_ = c_.headDim;
    Dv_ = c_.vDim();
    latent_ = c_.latentValues;
    // The flash prefill stages K and V rows of one width (docs/attention.md).
    materialisedPrefill_ = req.path == AttentionPath::Reference || Dv_ != D_;
  }

  RunReport run();

 private:
  Tensor alloc(const std::string& name, std::vector<std::int64_t> dims, Layout layout = Layout::Contiguous) {
    return rt_.allocate(name, dtype_, std::move(dims), layout);
  }
  void fill(Dispatcher& d, const Tensor& t, std::uint32_t seed, std::uint64_t first, std::uint64_t count);
  /// Elements [srcFirst, +count) of `src` to [dstFirst, +count) of `dst`, offsets as push constants.
  void copy(Dispatcher& d, const Tensor& src, std::uint64_t srcFirst, const Tensor& dst, std::uint64_t dstFirst,
            std::uint64_t count);
  std::string mustRecordEveryToken() const;
  bool replayDecode() const;
  /// Decode token `t`, every layer. With `fixedViews` the token's rows go through the fixed token
  /// tensors, so that every token binds the same buffer ranges (a replayed recording's).
  void decodeToken(Dispatcher& d, std::uint32_t t, bool fixedViews);
  void decodeDirect(Dispatcher& d, RunReport& report);
  void decodeReplayed(VulkanDispatcher& d, RunReport& report);
  /// New K/V rows into the caches at `pos` (keys alone where the values are the keys' columns).
  void appendRows(StepContext& ctx, const Tensor& k, const Tensor& v, const Tensor& kCache, const Tensor& vCache,
                  std::uint32_t pos, const PagedKv* pages) {
    if (latent_) append_.runKeys(ctx, k, kCache, pos, kRope(pos), pages);
    else append_.run(ctx, k, v, kCache, vCache, pos, kRope(pos), pages);
  }
  /// RoPE on K as it is appended at `pos0`, when the model has it.
  std::optional<KvAppendStep::Rope> kRope(std::uint32_t pos0) const {
    if (!c_.rope) return std::nullopt;
    return KvAppendStep::Rope{*c_.rope, ropeTable_, pos0};
  }
  AttentionCall attentionCall(const Tensor& q, std::uint32_t layer, const Tensor& o, std::uint32_t kvLen,
                              std::optional<std::uint32_t> fusedRopePosition) const;
  void attention(Dispatcher& d, const Tensor& q, std::uint32_t layer, const Tensor& o, std::uint32_t kvLen,
                 std::optional<std::uint32_t> fusedRopePosition);
  void attention(Dispatcher& d, const AttentionCall& call, const std::string& phase);
  /// Sequence b's caches of `layer`: its batch of one, or the pool with b's row of the block table.
  struct SequenceCache {
    Tensor k, v;
    std::optional<PagedKv> pages;
  };
  SequenceCache sequenceCache(std::uint32_t layer, std::uint32_t b) const;
  const PagedKv* pages() const { return pages_ ? &*pages_ : nullptr; }
  /// Prompts of different lengths: sequence b's prompt rows [0, promptOf(b)) and its decode token t in
  /// row P + t, at position promptOf(b) + t.
  AttentionCall raggedPrefillCall(const LayerInputs& in, std::uint32_t layer, const Tensor& out, std::uint32_t b) const;
  AttentionCall raggedDecodeCall(const LayerInputs& in, std::uint32_t layer, const Tensor& out, std::uint32_t t) const;
  void prefillLayer(Dispatcher& d, const LayerInputs& in, std::uint32_t layer, const Tensor& out);
  /// Over several ranks: this rank's prompt rows, rotated, appended and attended by the ring.
  void prefillRanked(Dispatcher& d, const LayerInputs& in, std::uint32_t layer, const Tensor& out, PhaseReport& phase);
  void appendRagged(StepContext& ctx, const LayerInputs& in, std::uint32_t layer, std::uint32_t t);
  std::uint32_t positionOfRow(std::uint32_t b, std::uint32_t row) const {
    const std::uint32_t n = c_.run.promptOf(b);
    return row < P_ ? row : n + (row - P_);
  }
  std::uint32_t rowOfPosition(std::uint32_t b, std::uint32_t pos) const {
    const std::uint32_t n = c_.run.promptOf(b);
    return pos < n ? pos : P_ + (pos - n);
  }
  void noteDecisions(const std::string& phase, const StepRecord& record);
  void planEveryCall() const;
  /// Started by mpirun with more than one process: the run is divided over the ranks.
  bool overRanks() const { return req_.ranks && req_.ranks->size() > 1; }
  void record(const SubmitResult& r, PhaseReport& phase);
  void loadInputs();
  void checkOutputs(RunReport& report);
  bool materialisedCheck() const;
  void referencePrefill();
  void compareExpected(RunReport& report);
  void checkFilesBeforeRunning();
  void checkMemoryBudget() const;
  void checkTokenRowsAligned() const;
  std::vector<float> hostInput(std::uint32_t layer, std::uint32_t kind);  ///< [T, B, H, D] as the device saw it
  /// The tensors --inputs holds: q, k and v, or q and k where the values are the keys' columns.
  std::vector<const char*> inputNames() const {
    return latent_ ? std::vector<const char*>{"q", "k"} : std::vector<const char*>{"q", "k", "v"};
  }

  Runtime& rt_;
  const RunRequest& req_;
  const ModelConfig& c_;
  Progress& progress_;
  FlashAttentionStep flash_;
  SdpaReferenceStep reference_;
  RopeStep rope_;
  KvAppendStep append_;
  DeviceWorkspace workspace_;
  std::uint32_t B_ = 1, P_ = 1, N_ = 0, T_ = 1, L_ = 1;
  std::uint32_t D_ = 1, Dv_ = 1;   ///< head_dim (q, k) and value_dim (v, o)
  bool latent_ = false;            ///< the values are the last Dv_ columns of each key row
  bool materialisedPrefill_ = false;
  DType dtype_ = DType::F16;
  DType kvDtype_ = DType::F16;  ///< of the caches: appends convert to it
  Tensor ropeTable_;  ///< when the model has rotary embeddings
  std::vector<Modifiers> modifiers_;  ///< per layer
  std::vector<Tensor> kCache_, vCache_, out_;
  std::vector<LayerInputs> inputs_;  ///< per layer from --inputs, or one shared synthetic set
  std::optional<SafetensorsReader> inputFile_;   ///< headers read before the run
  std::optional<SafetensorsReader> expectFile_;
  std::vector<SafetensorsTensor> inputTensors_;  ///< q, k, v of --inputs, read once the budget is checked
  std::map<std::string, std::uint64_t> kernels_;
  std::vector<SelectorReport> decisions_;  ///< one per distinct (phase, kernels)
  /// The checked layers' prefill through the materialised path, on the caches as the prefill left them.
  std::map<std::uint32_t, std::vector<float>> referencePrefill_;
  std::optional<RandomFill> fill_;
  KernelSource copyKernel_;
  bool keepOutputs_ = false;
  std::uint64_t qRow_ = 0, kvRow_ = 0, vRow_ = 0, oRow_ = 0;  ///< elements of one token's rows, all sequences
  LayerInputs token_;  ///< one token's q, k, v ([1, batch, heads, D]) for a replayed decode
  Tensor tokenOut_;
  bool ragged_ = false;            ///< run.prompt_lens: sequences of their own lengths
  std::optional<PagedKv> pages_;   ///< run.page_size: the block table every layer's pool shares
  Tensor lengths_;                 ///< ragged decode: u32 [B], each sequence's keys at the current token
  std::vector<std::uint32_t> lengthValues_;
  std::unique_ptr<RankedAttention> ranked_;  ///< a run over several ranks
  PhaseReport rankedDecode_;  ///< over several ranks: the decode's own submissions between the ranks' work
};

void Session::fill(Dispatcher& d, const Tensor& t, std::uint32_t seed, std::uint64_t first, std::uint64_t count) {
  fill_->record(d, t, seed, first, count);
}

void Session::copy(Dispatcher& d, const Tensor& src, std::uint64_t srcFirst, const Tensor& dst, std::uint64_t dstFirst,
                   std::uint64_t count) {
  const std::uint32_t wg = copyKernel_.layout.workgroup[0];
  const auto groups = static_cast<std::uint32_t>(std::min<std::uint64_t>((count + wg - 1) / wg, 4096));
  d.dispatch(copyKernel_,
             Arguments().bind("src", src).bind("dst", dst).set("count", static_cast<std::uint32_t>(count))
                 .set("src_first", static_cast<std::uint32_t>(srcFirst))
                 .set("dst_first", static_cast<std::uint32_t>(dstFirst)),
             {groups});
}

AttentionCall Session::attentionCall(const Tensor& q, std::uint32_t layer, const Tensor& o, std::uint32_t kvLen,
                                     std::optional<std::uint32_t> fusedRopePosition) const {
  AttentionCall call;
  call.q = q;
  call.k = kCache_[layer];
  call.v = vCache_[layer];
  call.o = o;
  call.kvLen = kvLen;
  call.scale = static_cast<float>(c_.softmaxScale);
  call.modifiers = modifiers_[layer];
  call.pages = pages_;
  // Not on the reference path, nor where the flash step takes the decode call as a prefill of its GQA
  // groups: attention() rotates q apart there. A rank's call is its shard's (ContextParallelDecode
  // sets its length), not one this step plans.
  if (fusedRopePosition && c_.rope && req_.path == AttentionPath::Flash &&
      (ranked_ || !flash_.takesGroupRows(call))) {
    call.rope = FusedRope{*c_.rope, ropeTable_, *fusedRopePosition};
  }
  return call;
}

Session::SequenceCache Session::sequenceCache(std::uint32_t layer, std::uint32_t b) const {
  if (!pages_) return {sequenceOf(kCache_[layer], b), sequenceOf(vCache_[layer], b), std::nullopt};
  const std::uint32_t n = pages_->maxPages();
  std::vector<std::uint32_t> row(pages_->table.begin() + std::size_t(b) * n, pages_->table.begin() + std::size_t(b + 1) * n);
  return {kCache_[layer], vCache_[layer], PagedKv{sequenceOf(pages_->blockTable, b), std::move(row)}};
}

AttentionCall Session::raggedPrefillCall(const LayerInputs& in, std::uint32_t layer, const Tensor& out,
                                         std::uint32_t b) const {
  const std::uint32_t n = c_.run.promptOf(b);
  AttentionCall call = attentionCall(sequenceOf(tokenView(in.q, 0, n), b), layer, sequenceOf(tokenView(out, 0, n), b),
                                     n, std::nullopt);
  SequenceCache cache = sequenceCache(layer, b);
  call.k = cache.k, call.v = cache.v, call.pages = cache.pages;
  return call;
}

AttentionCall Session::raggedDecodeCall(const LayerInputs& in, std::uint32_t layer, const Tensor& out,
                                        std::uint32_t t) const {
  // Every sequence's token t sits in row P + t; the queries move to each sequence's own end.
  std::vector<std::uint32_t> lengths(B_);
  for (std::uint32_t b = 0; b < B_; ++b) lengths[b] = c_.run.promptOf(b) + t + 1;
  const std::uint32_t longest = *std::max_element(lengths.begin(), lengths.end());
  AttentionCall call = attentionCall(tokenView(in.q, P_ + t, 1), layer, tokenView(out, P_ + t, 1), longest, std::nullopt);
  Tensor lengthsTensor = lengths_;
  if (!lengthsTensor.buffer) lengthsTensor = Tensor::describe("kv_lengths", DType::U32, {B_});  // planning only
  call.modifiers.insert(call.modifiers.begin(), std::make_shared<KeyLengthsStage>(lengthsTensor, lengths));
  return call;
}

// RoPE on each sequence's query at its own position, and its new K/V rows appended there.
void Session::appendRagged(StepContext& ctx, const LayerInputs& in, std::uint32_t layer, std::uint32_t t) {
  for (std::uint32_t b = 0; b < B_; ++b) {
    const std::uint32_t pos = c_.run.promptOf(b) + t;
    if (c_.rope) rope_.run(ctx, sequenceOf(tokenView(in.q, P_ + t, 1), b), ropeTable_, *c_.rope, pos);
    const SequenceCache cache = sequenceCache(layer, b);
    appendRows(ctx, sequenceOf(tokenView(in.k, P_ + t, 1), b), latent_ ? Tensor{} : sequenceOf(tokenView(in.v, P_ + t, 1), b),
               cache.k, cache.v, pos, cache.pages ? &*cache.pages : nullptr);
  }
}

void Session::prefillLayer(Dispatcher& d, const LayerInputs& in, std::uint32_t l, const Tensor& out) {
  StepContext ctx{d, workspace_, &rt_};
  if (!ragged_) {
    const Tensor q = tokenView(in.q, 0, P_);
    if (c_.rope) rope_.run(ctx, q, ropeTable_, *c_.rope, 0);
    appendRows(ctx, tokenView(in.k, 0, P_), latent_ ? Tensor{} : tokenView(in.v, 0, P_), kCache_[l], vCache_[l], 0,
               pages());
    attention(d, q, l, tokenView(out, 0, P_), P_, std::nullopt);
    return;
  }
  for (std::uint32_t b = 0; b < B_; ++b) {
    const std::uint32_t n = c_.run.promptOf(b);
    const AttentionCall call = raggedPrefillCall(in, l, out, b);
    if (c_.rope) rope_.run(ctx, call.q, ropeTable_, *c_.rope, 0);
    appendRows(ctx, sequenceOf(tokenView(in.k, 0, n), b), latent_ ? Tensor{} : sequenceOf(tokenView(in.v, 0, n), b),
               call.k, call.v, 0, call.pages ? &*call.pages : nullptr);
    attention(d, call, "prefill");
  }
}

void Session::prefillRanked(Dispatcher& d, const LayerInputs& in, std::uint32_t l, const Tensor& out,
                            PhaseReport& phase) {
  const KvShard mine = ranked_->prompt();
  // A rank without prompt positions passes the ring's blocks on; its one-row placeholders are not read.
  const std::uint32_t at = std::min(mine.begin, T_ - 1), rows = std::max(mine.size(), 1u);
  const Tensor q = tokenView(in.q, at, rows);
  if (mine.size() > 0) {
    StepContext ctx{d, workspace_, &rt_};
    if (c_.rope) rope_.run(ctx, q, ropeTable_, *c_.rope, mine.begin);
    // Rows 0.. of this rank's caches, rotated at their positions in the sequence.
    append_.run(ctx, tokenView(in.k, at, rows), tokenView(in.v, at, rows), kCache_[l], vCache_[l], 0, kRope(mine.begin));
  }
  record(d.submit(), phase);
  ranked_->prefill(attentionCall(q, l, tokenView(out, at, rows), rows, std::nullopt));
}

void Session::attention(Dispatcher& d, const Tensor& q, std::uint32_t layer, const Tensor& o, std::uint32_t kvLen,
                        std::optional<std::uint32_t> fusedRopePosition) {
  const AttentionCall call = attentionCall(q, layer, o, kvLen, fusedRopePosition);
  if (fusedRopePosition && c_.rope && !call.rope) {
    StepContext ctx{d, workspace_, &rt_};
    rope_.run(ctx, q, ropeTable_, *c_.rope, *fusedRopePosition);
  }
  attention(d, call, fusedRopePosition ? "decode" : "prefill");
}

void Session::attention(Dispatcher& d, const AttentionCall& call, const std::string& phase) {
  StepContext ctx{d, workspace_, &rt_};
  if (req_.path == AttentionPath::Reference || (phase == "prefill" && materialisedPrefill_)) {
    reference_.run(ctx, call);
    return;
  }
  noteDecisions(phase, flash_.run(ctx, call));
}

void Session::noteDecisions(const std::string& phase, const StepRecord& record) {
  const bool seen = std::any_of(decisions_.begin(), decisions_.end(), [&](const SelectorReport& s) {
    return s.phase == phase && s.kernels == record.kernels;
  });
  if (!seen) decisions_.push_back({phase, record.kernels, record.plan.decisions});
}

// Every layer's prefill and first decode call planned before anything is recorded: a shape the
// device cannot run fails here, not after the first layers' work.
void Session::planEveryCall() const {
  if (req_.path != AttentionPath::Flash) return;
  const LayerInputs& in = inputs_[0];
  if (ranked_) {
    // Each rank's calls have its shard's shapes (RingPrefill and ContextParallelDecode fit them); what the
    // knobs refuse of the decode's form (RoPE fused into it) is refused here, on the rank's own rows.
    for (std::uint32_t l = 0; l < L_ && N_ > 0; ++l) {
      flash_.plan(attentionCall(tokenView(in.q, P_, 1), l, tokenView(out_[0], P_, 1), ranked_->cacheRows(), P_));
    }
    return;
  }
  for (std::uint32_t l = 0; l < L_; ++l) {
    if (ragged_) {
      for (std::uint32_t b = 0; b < B_ && !materialisedPrefill_; ++b) flash_.plan(raggedPrefillCall(in, l, out_[0], b));
      if (N_ > 0) flash_.plan(raggedDecodeCall(in, l, out_[0], 0));
      continue;
    }
    if (!materialisedPrefill_) {
      flash_.plan(attentionCall(tokenView(in.q, 0, P_), l, tokenView(out_[0], 0, P_), P_, std::nullopt));
    }
    if (N_ > 0) flash_.plan(attentionCall(tokenView(in.q, P_, 1), l, tokenView(out_[0], P_, 1), P_ + 1, P_));
  }
}

void Session::record(const SubmitResult& r, PhaseReport& phase) {
  for (const auto& t : r.dispatches) {
    ++kernels_[t.kernel];
    // Making inputs and moving a replayed token's rows are not attention work.
    if (t.kernel.starts_with("RandomFill") || t.kernel.starts_with("TokenCopy")) phase.inputGpuMicros += t.gpuMicros;
    else phase.gpuMicros += t.gpuMicros;
  }
}

void Session::loadInputs() {
  for (const char* name : inputNames()) inputTensors_.push_back(inputFile_->read(name, "--inputs"));
  for (std::uint32_t l = 0; l < L_; ++l) {
    LayerInputs in;
    in.q = alloc(fmt::format("q{}", l), {T_, B_, c_.nHeads, D_});
    in.k = alloc(fmt::format("k{}", l), {T_, B_, c_.nKvHeads, D_});
    rt_.upload(in.q, hostInput(l, 0));
    rt_.upload(in.k, hostInput(l, 1));
    if (!latent_) {
      in.v = alloc(fmt::format("v{}", l), {T_, B_, c_.nKvHeads, Dv_});
      rt_.upload(in.v, hostInput(l, 2));
    }
    inputs_.push_back(in);
  }
}

std::vector<float> Session::hostInput(std::uint32_t layer, std::uint32_t kind) {
  if (kind == 2 && latent_) {
    // The values are the last Dv_ columns of each key row.
    const auto k = hostInput(layer, 1);
    std::vector<float> v(k.size() / D_ * Dv_);
    for (std::size_t r = 0; r < k.size() / D_; ++r) std::copy_n(k.data() + r * D_ + (D_ - Dv_), Dv_, v.data() + r * Dv_);
    return v;
  }
  const std::uint32_t heads = kind == 0 ? c_.nHeads : c_.nKvHeads;
  const std::size_t row = std::size_t(heads) * (kind == 2 ? Dv_ : D_);
  std::vector<float> out(std::size_t(T_) * B_ * row);
  if (inputFile_) {
    // The file holds [layers, batch, tokens, heads, D]; the device buffers [tokens, batch, heads, D].
    const SafetensorsTensor& t = inputTensors_[kind];
    const std::size_t layerElements = std::size_t(B_) * T_ * row, size = dtypeBytes(t.dtype);
    const auto all = decodeElements(
        std::span<const std::byte>(t.bytes).subspan(layer * layerElements * size, layerElements * size), t.dtype);
    for (std::uint32_t b = 0; b < B_; ++b) {
      for (std::uint32_t t0 = 0; t0 < T_; ++t0) {
        const float* src = all.data() + (std::size_t(b) * T_ + t0) * row;
        std::copy(src, src + row, out.data() + (std::size_t(t0) * B_ + b) * row);
      }
    }
  } else {
    out = randomUniforms(seedFor(c_.run.seed, layer, kind), 0, out.size());
  }
  return decodeElements(encodeElements(out, dtype_), dtype_);
}

// Everything a run reads or writes at its end is checked at its start, so a long run is not wasted.
void Session::checkFilesBeforeRunning() {
  const auto named = [](const char* flag, const std::optional<std::filesystem::path>& p) {
    return PathArgument{flag, p.value_or(std::filesystem::path())};
  };
  checkOutputsApart({named("--inputs", req_.inputs), named("--expect", req_.expect)}, {named("--save", req_.save)});
  // Headers only: names and shapes are checked before any tensor is read.
  const auto checkShape = [](const SafetensorsReader& file, const char* name, const char* flag,
                             const std::vector<std::int64_t>& want, const char* verb) {
    const auto& shape = file.entry(name, flag).shape;
    if (shape != want) {
      throw UserError(flag, fmt::format("tensor '{}' in {} has shape [{}]; this run {} [{}] (layers, batch, tokens, "
                                        "heads, head_dim)", name, file.origin(), fmt::join(shape, ", "), verb,
                                        fmt::join(want, ", ")));
    }
  };
  if (req_.inputs) {
    inputFile_ = SafetensorsReader::open(*req_.inputs);
    checkShape(*inputFile_, "q", "--inputs", {L_, B_, T_, c_.nHeads, D_}, "needs");
    checkShape(*inputFile_, "k", "--inputs", {L_, B_, T_, c_.nKvHeads, D_}, "needs");
    if (!latent_) checkShape(*inputFile_, "v", "--inputs", {L_, B_, T_, c_.nKvHeads, Dv_}, "needs");
  }
  if (req_.expect) {
    expectFile_ = SafetensorsReader::open(*req_.expect);
    checkShape(*expectFile_, "o", "--expect", {L_, B_, T_, c_.nHeads, Dv_}, "produces");
  }
  if (req_.save) checkWritableTarget(*req_.save, "--save");
}

// The whole run's memory against the device's heap and the host's room, before the first allocation.
void Session::checkMemoryBudget() const {
  const auto bytesOf = [](const std::optional<SafetensorsReader>& file, std::initializer_list<const char*> names) {
    std::uint64_t n = 0;
    for (const char* name : names) {
      if (file) n += file->entry(name).end - file->entry(name).begin;
    }
    return n;
  };
  std::uint64_t inputBytes = 0;
  for (const char* name : inputNames()) inputBytes += bytesOf(inputFile_, {name});
  const RunFileBytes files{inputBytes, bytesOf(expectFile_, {"o"})};
  // Over several ranks each holds its share of the positions in its caches.
  std::optional<std::uint32_t> cacheRows;
  if (overRanks()) {
    cacheRows = RankedAttention::cacheRowsOf(P_, N_, req_.ranks->size(), req_.ranks->rank());
  }
  checkMemoryPlan(runMemoryPlan(req_, files, rt_.info(), cacheRows), rt_.info(), hostMemory());
}

// The run binds each token's rows of q, k, v and o at that token's byte offset, which the device
// takes only at multiples of its storage offset alignment: head dims whose rows miss it are refused
// before any work, whatever the prompt (an offset that happened to fall right would hide it).
void Session::checkTokenRowsAligned() const {
  const std::uint64_t align = rt_.device().storageOffsetAlignment();
  const std::uint64_t bytes = dtypeBytes(dtype_), kvRowBytes = std::uint64_t(B_) * c_.nKvHeads * bytes;
  for (const auto& [field, dim] : {std::pair{"head_dim", D_}, std::pair{"value_dim", Dv_}}) {
    if (kvRowBytes * dim % align == 0) continue;
    throw UnsupportedError(fmt::format(
        "/attention/{}: {} with {} KV heads of {} at batch {}: a token's K/V rows take {} bytes, and device '{}' binds "
        "storage buffers at multiples of {} bytes; accepted on this device: a {} that is a multiple of {}",
        field, dim, c_.nKvHeads, dtypeName(dtype_), B_, kvRowBytes * dim, rt_.info().name, align, field,
        align / std::gcd(align, kvRowBytes)));
  }
}

RunReport Session::run() {
  if (overRanks()) RankedAttention::requireAgreement(*req_.ranks, req_);
  checkFilesBeforeRunning();
  checkMemoryBudget();
  checkTokenRowsAligned();
  if (overRanks()) {
    RankedAttention::checkSupported(req_);
    ranked_ = std::make_unique<RankedAttention>(rt_, *req_.ranks, P_, N_, req_.attention);
  }
  if (const std::string why = mustRecordEveryToken(); req_.attention.decodeReplay == Force::On && !why.empty()) {
    throw UserError(req_.attention.fieldOf("FOUNDRY_DECODE_REPLAY"),
                    fmt::format("1 cannot be used here: {}, so every token is recorded; accepted here: 0 or auto", why));
  }
  RunReport report;
  report.foundryVersion = FOUNDRY_VERSION;
  report.timestamp = utcTimestamp();
  report.configPath = req_.configPath;
  report.knobs = knobReport(Options{rt_.options(), req_.attention});
  report.model = c_.name;
  report.device = rt_.info().name;
  report.driver = rt_.info().driverName;
  report.path = req_.path == AttentionPath::Flash ? "flash" : "reference";
  report.run = c_.run;
  report.nHeads = c_.nHeads;
  report.nKvHeads = c_.nKvHeads;
  report.headDim = c_.headDim;
  report.valueDim = Dv_;
  report.latentValues = latent_;
  rt_.device().resetPeak();
  const std::uint64_t baseline = rt_.device().memoryStats().liveBytes;
  const auto& kc = rt_.kernels();
  // Kernels compiled, found in memory and on disk, pipelines created: the run's are the counts past these.
  const auto counts = [&] {
    return std::array{kc.compiles(), kc.memoryHits(), kc.diskHits(), rt_.pipelines().created()};
  };
  auto before = counts();

  fill_.emplace(rt_, dtype_);
  if (c_.rope) ropeTable_ = makeRopeTable(rt_, *c_.rope, c_.headDim);
  for (std::uint32_t l = 0; l < L_; ++l) {
    modifiers_.push_back(layerModifiers(c_, l, [&](const std::string& name, const std::vector<double>& values) {
      const Tensor t = rt_.allocate(name, DType::F32, {static_cast<std::int64_t>(values.size())});
      rt_.upload(t, std::vector<float>(values.begin(), values.end()));
      return t;
    }));
    report.layerModifiers.push_back(describeModifiers(c_.modifiersOf(l)));
  }
  // Over several ranks, a rank's caches hold its range of the positions.
  std::vector<std::int64_t> dims = {B_, c_.nKvHeads, ranked_ ? ranked_->cacheRows() : T_, D_};
  if (c_.run.pageSize) {
    // One block table for every layer, each sequence's pages shuffled over the pool: a kernel that
    // assumed neighbouring pages would read another sequence's rows.
    const std::uint32_t ps = c_.run.pageSize, maxPages = (T_ + ps - 1) / ps;
    std::vector<std::uint32_t> table(std::size_t(B_) * maxPages);
    std::iota(table.begin(), table.end(), 0u);
    std::shuffle(table.begin(), table.end(), std::mt19937(static_cast<std::uint32_t>(c_.run.seed)));
    // Rows 256 bytes apart, so that each sequence's row is a view any device can bind on its own.
    const std::uint32_t stride = (maxPages + 63) / 64 * 64;
    std::vector<std::uint32_t> padded(std::size_t(B_) * stride, 0);
    for (std::uint32_t b = 0; b < B_; ++b) {
      std::copy_n(table.begin() + std::size_t(b) * maxPages, maxPages, padded.begin() + std::size_t(b) * stride);
    }
    Tensor t = rt_.allocate("block_table", DType::U32, {B_, stride});
    rt_.upload(t, std::span<const std::uint32_t>(padded));
    t.dims[1] = maxPages;
    pages_ = PagedKv{t, std::move(table)};
    dims = {std::int64_t(B_) * maxPages, c_.nKvHeads, ps, D_};
  }
  if (ragged_) {
    lengths_ = rt_.allocate("kv_lengths", DType::U32, {B_});
    lengthValues_.assign(B_, 0);
  }
  const std::uint64_t cacheRows = std::uint64_t(dims[0]) * c_.nKvHeads * dims[2];
  // Per token over a block of 32 (an int8 block's scales are a fraction of a byte a token), rounded
  // once at the end.
  std::uint64_t bytesPer32 = 0;
  for (std::uint32_t l = 0; l < L_; ++l) {
    kCache_.push_back(rt_.allocate(fmt::format("k_cache{}", l), kvDtype_, dims, Layout::KvCache));
    report.cacheBytes += cacheBytes(kvDtype_, cacheRows, D_);
    bytesPer32 += cacheBytes(kvDtype_, 32ull * c_.nKvHeads, D_);
    if (latent_) {
      vCache_.push_back(latentValueView(kCache_.back(), Dv_));
      continue;
    }
    std::vector<std::int64_t> vDims = dims;
    vDims.back() = Dv_;
    vCache_.push_back(rt_.allocate(fmt::format("v_cache{}", l), kvDtype_, vDims, Layout::KvCache));
    report.cacheBytes += cacheBytes(kvDtype_, cacheRows, Dv_);
    bytesPer32 += cacheBytes(kvDtype_, 32ull * c_.nKvHeads, Dv_);
  }
  report.kvBytesPerToken = (bytesPer32 + 16) / 32;
  // Every layer's output is kept when something reads them afterwards; otherwise one is reused.
  const bool keepOutputs = keepOutputs_ = req_.check || req_.expect || req_.save;
  for (std::uint32_t l = 0; l < (keepOutputs ? L_ : 1); ++l) {
    out_.push_back(alloc(fmt::format("o{}", l), {T_, B_, c_.nHeads, Dv_}));
    // An output nobody wrote reads NaN, so the check and --expect see it.
    if (keepOutputs) rt_.poison(out_.back());
  }
  if (req_.inputs) {
    loadInputs();
  } else {
    inputs_.push_back({alloc("q_in", {T_, B_, c_.nHeads, D_}), alloc("k_in", {T_, B_, c_.nKvHeads, D_}),
                       latent_ ? Tensor{} : alloc("v_in", {T_, B_, c_.nKvHeads, Dv_})});
  }
  const std::uint64_t qRow = qRow_ = std::uint64_t(B_) * c_.nHeads * D_;
  const std::uint64_t kvRow = kvRow_ = std::uint64_t(B_) * c_.nKvHeads * D_;
  const std::uint64_t vRow = vRow_ = std::uint64_t(B_) * c_.nKvHeads * Dv_;
  oRow_ = std::uint64_t(B_) * c_.nHeads * Dv_;
  if (replayDecode() && N_ > 0) {
    copyKernel_ = rt_.builder().workgroup(std::max(256u, rt_.info().subgroupSize)).emplace<TokenCopyStage>(dtype_).build();
    token_ = {alloc("q_token", {1, B_, c_.nHeads, D_}), alloc("k_token", {1, B_, c_.nKvHeads, D_}),
              latent_ ? Tensor{} : alloc("v_token", {1, B_, c_.nKvHeads, Dv_})};
    tokenOut_ = alloc("o_token", {1, B_, c_.nHeads, Dv_});
  }
  planEveryCall();
  auto dispatcher = rt_.dispatcher();

  // Prefill: a submission per layer, so that progress counts finished GPU work; the wait between
  // layers costs little next to a layer's prefill.
  auto start = Clock::now();
  progress_.update("prefill", 0, L_);
  for (std::uint32_t l = 0; l < L_; ++l) {
    const LayerInputs& in = req_.inputs ? inputs_[l] : inputs_[0];
    // Over several ranks, each makes the rows of its own prompt positions (the values are the same).
    const KvShard rows = ranked_ ? ranked_->prompt() : KvShard{0, P_};
    if (!req_.inputs && rows.size() > 0) {
      fill(*dispatcher, tokenView(in.q, rows.begin, rows.size()), seedFor(c_.run.seed, l, 0), qRow * rows.begin,
           qRow * rows.size());
      fill(*dispatcher, tokenView(in.k, rows.begin, rows.size()), seedFor(c_.run.seed, l, 1), kvRow * rows.begin,
           kvRow * rows.size());
      if (!latent_) {
        fill(*dispatcher, tokenView(in.v, rows.begin, rows.size()), seedFor(c_.run.seed, l, 2), vRow * rows.begin,
             vRow * rows.size());
      }
    }
    if (ranked_) prefillRanked(*dispatcher, in, l, out_[keepOutputs ? l : 0], report.prefill);
    else prefillLayer(*dispatcher, in, l, out_[keepOutputs ? l : 0]);
    record(dispatcher->submit(), report.prefill);
    progress_.update("prefill", l + 1, L_);
  }
  report.prefill.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.prefill.tokens = 0;
  for (std::uint32_t b = 0; b < B_; ++b) report.prefill.tokens += c_.run.promptOf(b);
  // Decode's appends requantize an int8 block whose scale grows, so the materialised comparison reads
  // the caches now. What it allocates, compiles and creates is the check's, not the run's.
  const std::uint64_t peak = rt_.device().memoryStats().peakBytes;
  if (materialisedCheck()) {
    const auto beforeCheck = counts();
    referencePrefill();
    const auto afterCheck = counts();
    for (std::size_t i = 0; i < before.size(); ++i) before[i] += afterCheck[i] - beforeCheck[i];
    rt_.device().resetPeak();
  }

  // Decode: one submission per token, every layer in it.
  start = Clock::now();
  progress_.update("decode", 0, N_);
  if (replayDecode()) decodeReplayed(*dispatcher, report);
  else decodeDirect(*dispatcher, report);
  report.decode.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.decode.tokens = std::uint64_t(B_) * N_;
  progress_.finish();

  if (ranked_) {
    // Rank 0 gets every rank's prompt rows for the check; every rank's figures go into the report.
    for (std::uint32_t l = 0; l < out_.size() && keepOutputs; ++l) ranked_->gatherPromptRows(out_[l], oRow_);
    report.ranks = ranked_->report();
    const RankReport& mine = report.ranks->ranks[req_.ranks->rank()];
    report.prefill.gpuMicros += mine.prefillAttentionMicros + mine.prefillMergeMicros;
    report.decode.gpuMicros += mine.decodeAttentionMicros + report.ranks->decodeMergeMicros + rankedDecode_.gpuMicros;
    report.decode.inputGpuMicros += rankedDecode_.inputGpuMicros;
    for (const auto& [k, n] : ranked_->kernels()) kernels_[k] += n;
  }
  report.kernels = kernels_;
  report.selector = decisions_;
  report.scratchBytes = workspace_.bytes();
  report.peakDeviceBytes = std::max(peak, rt_.device().memoryStats().peakBytes) - baseline;
  const auto after = counts();
  report.kernelCompiles = after[0] - before[0];
  report.kernelMemoryHits = after[1] - before[1];
  report.kernelDiskHits = after[2] - before[2];
  report.pipelines = after[3] - before[3];
  // Over several ranks rank 0 checks (it holds every output); the others report no check.
  if (req_.check && (!ranked_ || req_.ranks->rank() == 0)) checkOutputs(report);
  if (req_.expect || req_.save) compareExpected(report);
  return report;
}

// Why this run records every decode token, if it must: "" where a recording may be replayed.
std::string Session::mustRecordEveryToken() const {
  if (req_.attention.sdpaDebugOnlineCompare) return "the online compare submits part-way through a token";
  if (ranked_) return "over several ranks each token waits for the others between its submissions";
  // Ragged decodes upload each token's lengths and append sequence by sequence.
  if (ragged_) return "prompts of their own lengths (run.prompt_lens) upload each token's lengths";
  return "";
}

bool Session::replayDecode() const {
  // By default on GPUs (the H200: 664 against 289-382 decode tokens/s by wall time, outputs checked)
  // and off on CPU drivers, where it was a little slower (docs/performance.md).
  if (!mustRecordEveryToken().empty()) return false;
  if (req_.attention.decodeReplay != Force::Auto) return req_.attention.decodeReplay == Force::On;
  return rt_.info().kind != DeviceKind::Cpu;
}

void Session::decodeToken(Dispatcher& d, std::uint32_t t, bool fixedViews) {
  const std::uint32_t pos = P_ + t;
  for (std::uint32_t l = 0; l < L_; ++l) {
    const LayerInputs& in = req_.inputs ? inputs_[l] : inputs_[0];
    const Tensor& out = out_[keepOutputs_ ? l : 0];
    Tensor q = tokenView(in.q, pos, 1), k = tokenView(in.k, pos, 1), v = latent_ ? Tensor{} : tokenView(in.v, pos, 1);
    Tensor o = tokenView(out, pos, 1);
    if (fixedViews) {
      q = tokenView(token_.q, 0, 1), k = tokenView(token_.k, 0, 1);
      if (!latent_) v = tokenView(token_.v, 0, 1);
      o = tokenView(tokenOut_, 0, 1);
    }
    if (!req_.inputs) {
      fill(d, q, seedFor(c_.run.seed, l, 0), qRow_ * pos, qRow_);
      fill(d, k, seedFor(c_.run.seed, l, 1), kvRow_ * pos, kvRow_);
      if (!latent_) fill(d, v, seedFor(c_.run.seed, l, 2), vRow_ * pos, vRow_);
    } else if (fixedViews) {
      copy(d, in.q, qRow_ * pos, token_.q, 0, qRow_);
      copy(d, in.k, kvRow_ * pos, token_.k, 0, kvRow_);
      if (!latent_) copy(d, in.v, vRow_ * pos, token_.v, 0, vRow_);
    }
    StepContext ctx{d, workspace_, &rt_};
    if (ragged_) {
      appendRagged(ctx, in, l, t);
      attention(d, raggedDecodeCall(in, l, out, t), "decode");
      continue;
    }
    if (ranked_) {
      record(d.submit(), rankedDecode_);  // the token's rows exist before the ranks' dispatchers read them
      ranked_->append(k, v, kCache_[l], vCache_[l], pos, kRope(pos));
      ranked_->decode(attentionCall(q, l, o, pos + 1, pos));
      continue;
    }
    appendRows(ctx, k, v, kCache_[l], vCache_[l], pos, pages());
    attention(d, q, l, o, pos + 1, pos);
    // Kept outputs go to their place in the layer's output; otherwise nobody reads them.
    if (fixedViews && keepOutputs_) copy(d, tokenOut_, 0, out, oRow_ * pos, oRow_);
  }
}

void Session::decodeDirect(Dispatcher& d, RunReport& report) {
  for (std::uint32_t t = 0; t < N_; ++t) {
    if (ragged_) {
      // The previous token's work has finished (submit waits): its lengths can be overwritten.
      for (std::uint32_t b = 0; b < B_; ++b) lengthValues_[b] = c_.run.promptOf(b) + t + 1;
      rt_.upload(lengths_, std::span<const std::uint32_t>(lengthValues_));
    }
    decodeToken(d, t, false);
    record(d.submit(), report.decode);
    progress_.update("decode", t + 1, N_);
  }
}

// Token t's dispatches are those of the token before with other push constants and grids, so they
// are recorded once (two recordings: the host writes token t + 1's parameters into one while the
// device runs token t from the other) and replayed. A token whose dispatches differ (the Split-K
// plan changed its scratch) is recorded afresh.
void Session::decodeReplayed(VulkanDispatcher& d, RunReport& report) {
  std::array<std::shared_ptr<Recording>, 2> recordings;
  std::array<Submission, 2> running;
  for (std::uint32_t t = 0; t < N_; ++t) {
    auto& recording = recordings[t % 2];
    bool replayed = false;
    if (recording) {
      RecordingUpdate update(d, recording);
      decodeToken(update, t, true);
      if (update.matches()) {
        running[t % 2] = update.submitAsync();
        replayed = true;
        ++report.decode.replays;
      } else {
        report.decode.rerecorded = fmt::format("token {}: {}", t, update.mismatch());
      }
    }
    if (!replayed) {
      d.beginParameterized();
      decodeToken(d, t, true);
      recording = d.capture();
      running[t % 2] = d.replay(*recording);
      ++report.decode.recordings;
    }
    if (t > 0) {
      record(d.wait(running[(t - 1) % 2]), report.decode);
      progress_.update("decode", t, N_);
    }
  }
  if (N_ > 0) record(d.wait(running[(N_ - 1) % 2]), report.decode);
  progress_.update("decode", N_, N_);
}

// Whether --check also compares the checked layers' prefill with the materialised path on the device:
// not where the prefill was itself materialised, nor per sequence (ragged prompts: the CPU rows only),
// nor over several ranks (rank 0's caches hold its own range), nor past the materialised scores' limit.
bool Session::materialisedCheck() const {
  return req_.check && !materialisedPrefill_ && !ragged_ && !ranked_ &&
         SdpaReferenceStep::scratchBytes({B_, c_.nHeads, c_.nKvHeads, P_, P_, P_, D_, dtype_}) <=
             rt_.info().maxStorageBufferRange;
}

void Session::referencePrefill() {
  const Tensor qr = alloc("check_q", {T_, B_, c_.nHeads, D_});
  const Tensor orr = alloc("check_o", {T_, B_, c_.nHeads, Dv_});
  DeviceWorkspace scores(rt_);  // freed before the decode
  for (const std::uint32_t l : std::set<std::uint32_t>{0u, L_ - 1}) {
    rt_.upload(qr, hostInput(l, 0));
    auto d = rt_.dispatcher();
    StepContext ctx{*d, scores, &rt_};
    if (c_.rope) rope_.run(ctx, tokenView(qr, 0, P_), ropeTable_, *c_.rope, 0);
    AttentionCall call{tokenView(qr, 0, P_), kCache_[l], vCache_[l], tokenView(orr, 0, P_), P_};
    call.scale = static_cast<float>(c_.softmaxScale);
    call.modifiers = modifiers_[l];
    call.pages = pages_;
    reference_.run(ctx, call);
    d->submit();
    auto want = rt_.download(orr);
    want.resize(std::size_t(P_) * B_ * c_.nHeads * Dv_);
    referencePrefill_[l] = std::move(want);
  }
}

// Sampled layers and tokens against the CPU float64 reference, and the sampled layers' prefill against
// the materialised path on the device.
void Session::checkOutputs(RunReport& report) {
  CheckReport& chk = report.check;
  chk.ran = true;
  chk.bound = req_.tolerance > 0 ? req_.tolerance : std::max(defaultTolerance(dtype_), defaultTolerance(kvDtype_));
  const std::set<std::uint32_t> layers = {0u, L_ - 1};
  const std::uint32_t D = D_, Dv = Dv_;
  for (const std::uint32_t l : layers) {
    auto q = hostInput(l, 0), k = hostInput(l, 1), v = hostInput(l, 2);
    // RoPE on the host, each row at its sequence's position, as the device did.
    std::vector<std::uint32_t> qPos(q.size() / D), kPos(k.size() / D);
    if (latent_) v = {};  // taken from the rotated keys below
    for (std::size_t i = 0; i < qPos.size(); ++i) {
      qPos[i] = positionOfRow(static_cast<std::uint32_t>(i / c_.nHeads % B_), static_cast<std::uint32_t>(i / (B_ * c_.nHeads)));
    }
    for (std::size_t i = 0; i < kPos.size(); ++i) {
      kPos[i] = positionOfRow(static_cast<std::uint32_t>(i / c_.nKvHeads % B_),
                              static_cast<std::uint32_t>(i / (B_ * c_.nKvHeads)));
    }
    if (c_.rope) {
      cpuRope(*c_.rope, D, q, qPos);
      cpuRope(*c_.rope, D, k, kPos);
    }
    if (latent_) {
      v.resize(k.size() / D * Dv);
      for (std::size_t r = 0; r < k.size() / D; ++r) std::copy_n(k.data() + r * D + (D - Dv), Dv, v.data() + r * Dv);
    }
    // The caches hold rotated K, and V, converted to their own type. Quantized caches are checked
    // against the values before quantization, within the quantization bound.
    if (!quantized(kvDtype_)) {
      k = decodeElements(encodeElements(k, kvDtype_), kvDtype_);
      v = decodeElements(encodeElements(v, kvDtype_), kvDtype_);
    }
    const auto got = rt_.download(out_[l]);
    // Each sequence on its own: its first, middle and last prompt positions and its first and last
    // decode tokens, each against the keys at positions up to it.
    for (std::uint32_t b = 0; b < B_; ++b) {
      const std::uint32_t n = c_.run.promptOf(b);
      std::set<std::uint32_t> positions = {0u, n / 2, n - 1};
      if (N_ > 0) positions.insert({n, n + N_ - 1});
      // Over several ranks every rank's rows came from its own ring prefill: each rank's first, middle
      // and last prompt positions too.
      for (std::uint32_t r = 0; ranked_ && r < req_.ranks->size(); ++r) {
        const KvShard s = ranked_->promptShards().shard(r);
        if (s.size() > 0) positions.insert({s.begin, s.begin + s.size() / 2, s.end - 1});
      }
      for (const std::uint32_t pos : positions) {
        AttentionProblem p;
        p.batch = 1;
        p.nHeads = c_.nHeads;
        p.nKvHeads = c_.nKvHeads;
        p.qLen = 1;
        p.kvLen = p.kvCapacity = pos + 1;
        p.headDim = D;
        p.valueDim = Dv;
        p.dtype = dtype_;
        p.scale = static_cast<float>(c_.softmaxScale);
        p.modifiers = modifiers_[l];
        // Packed [1, H, 1, D] and [1, Hkv, pos + 1, D] from the [rows, batch, heads, D] host arrays.
        std::vector<float> qs(std::size_t(c_.nHeads) * D), ks(std::size_t(c_.nKvHeads) * (pos + 1) * D),
            vs(std::size_t(c_.nKvHeads) * (pos + 1) * Dv), gs(std::size_t(c_.nHeads) * Dv);
        const std::size_t row = rowOfPosition(b, pos);
        for (std::uint32_t h = 0; h < c_.nHeads; ++h) {
          const std::size_t at = (row * B_ + b) * c_.nHeads + h;
          std::copy_n(q.data() + at * D, D, qs.data() + std::size_t(h) * D);
          std::copy_n(got.data() + at * Dv, Dv, gs.data() + std::size_t(h) * Dv);
        }
        for (std::uint32_t h = 0; h < c_.nKvHeads; ++h) {
          for (std::uint32_t j = 0; j <= pos; ++j) {
            const std::size_t at = (std::size_t(rowOfPosition(b, j)) * B_ + b) * c_.nKvHeads + h;
            std::copy_n(k.data() + at * D, D, ks.data() + kvIndex(p, 0, h, j));
            std::copy_n(v.data() + at * Dv, Dv, vs.data() + vIndex(p, 0, h, j));
          }
        }
        const auto want = cpuAttention(p, qs, ks, vs);
        const ErrorStats e = compareOutputs(gs, want);
        chk.rows += c_.nHeads;
        chk.maxRelVsCpu = std::max(chk.maxRelVsCpu, e.reportedRel());
        const Axis axes[] = {{"head", c_.nHeads}, {"d", Dv}};
        if (const std::string why = describeCheckFailure(e, chk.bound, "o", axes, gs, want); !why.empty()) {
          chk.failures.push_back(fmt::format("layer {} sequence {} position {} vs the CPU: {}", l, b, pos, why));
        }
      }
    }
    // The same layer's prefill through the materialised path, run before the decode (referencePrefill).
    if (const auto it = referencePrefill_.find(l); it != referencePrefill_.end()) {
      const std::size_t n = std::size_t(P_) * B_ * c_.nHeads * Dv;
      const std::vector<float> mine(got.begin(), got.begin() + n);
      const std::vector<double> ref(it->second.begin(), it->second.end());
      const ErrorStats e = compareOutputs(mine, ref);
      chk.maxRelVsMaterialised = std::max(chk.maxRelVsMaterialised, e.reportedRel());
      chk.materialisedRan = true;
      const Axis axes[] = {{"token", P_}, {"batch", B_}, {"head", c_.nHeads}, {"d", Dv}};
      if (const std::string why = describeCheckFailure(e, chk.bound, "o", axes, mine, ref); !why.empty()) {
        chk.failures.push_back(fmt::format("layer {} prefill vs SdpaReferenceStep: {}", l, why));
      }
    }
  }
  chk.passed = chk.failures.empty();
}

// --expect and --save: outputs as [layers, batch, tokens, heads, D].
void Session::compareExpected(RunReport& report) {
  const std::size_t row = std::size_t(c_.nHeads) * Dv_;
  std::vector<float> all(std::size_t(L_) * B_ * T_ * row);
  for (std::uint32_t l = 0; l < L_; ++l) {
    const auto got = rt_.download(out_[l]);
    for (std::uint32_t b = 0; b < B_; ++b) {
      for (std::uint32_t t = 0; t < T_; ++t) {
        // Rows past a shorter prompt belong to no token of the sequence: zeros.
        if (t >= c_.run.promptOf(b) && t < P_) continue;
        std::copy_n(got.data() + (std::size_t(t) * B_ + b) * row, row,
                    all.data() + ((std::size_t(l) * B_ + b) * T_ + t) * row);
      }
    }
  }
  const std::vector<std::int64_t> shape = {L_, B_, T_, c_.nHeads, Dv_};
  if (req_.save) {
    const std::vector<NamedTensor> tensors = {{"o", shape, all}};
    report.savePath = req_.save->string();
    try {
      writeSafetensors(*req_.save, tensors, dtype_, {{"model", c_.name}, {"producer", "foundry run"}});
    } catch (const Error& e) {
      // Kept in the report, not thrown: a full disk must not also cost the summary and --json.
      report.saveFailure = OutputFailure{e.kind(), fmt::format("--save: {}", e.what())};
    }
  }
  if (!expectFile_) return;
  const auto read = expectFile_->read("o", "--expect").floats();
  const std::vector<double> want(read.begin(), read.end());
  const ErrorStats e = compareOutputs(all, want);
  report.expectRelError = e.reportedRel();
  const double bound = req_.tolerance > 0 ? req_.tolerance : defaultTolerance(dtype_);
  report.expectPassed = e.passes(bound);
  const Axis axes[] = {{"layer", L_}, {"batch", B_}, {"token", T_}, {"head", c_.nHeads}, {"d", Dv_}};
  if (!report.expectPassed) report.expectFailure = describeMismatch(e, bound, "o", axes, all, want);
}

}  // namespace

RunReport runModel(Runtime& runtime, const RunRequest& request, Progress& progress) {
  return Session(runtime, request, progress).run();
}

}  // namespace foundry
