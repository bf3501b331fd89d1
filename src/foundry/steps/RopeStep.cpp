#include "foundry/steps/RopeStep.h"

#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/Runtime.h"
#include "foundry/StorageFormat.h"
#include "foundry/stages/KvAccessStage.h"
#include "foundry/steps/AttentionCall.h"
#include "foundry/stages/KvAppendStage.h"
#include "foundry/stages/KvQuantAppendStage.h"
#include "foundry/stages/RopeStage.h"

namespace foundry {

namespace {

constexpr std::uint32_t kWorkgroup = 64;

std::uint32_t workgroupFor(const DeviceInfo& d) { return std::max(kWorkgroup, d.subgroupSize); }

/// (batch, heads, tokens, head_dim) and their strides for a head-major or token-major tensor.
struct Rows {
  std::uint32_t batch, heads, tokens, dim;
  std::uint32_t sb, sh, ss;
};

Rows rowsOf(const Tensor& t, const char* role) {
  if (t.rank() != 4 || !t.lastDimContiguous()) {
    throw UserError(role, fmt::format("'{}' must be a 4-d tensor contiguous in head_dim, got {}", t.name, t.shapeString()));
  }
  const bool token = t.layout == Layout::TokenMajor;
  if (!token && t.layout != Layout::HeadMajor) {
    throw UserError(role, fmt::format("'{}' has layout {}; accepted: head-major, token-major", t.name, layoutName(t.layout)));
  }
  auto u = [](std::int64_t x) { return static_cast<std::uint32_t>(x); };
  return {u(t.dim(0)), u(t.dim(token ? 2 : 1)), u(t.dim(token ? 1 : 2)), u(t.dim(3)),
          u(t.stride(0)), u(t.stride(token ? 2 : 1)), u(t.stride(token ? 1 : 2))};
}

RopeStageParams paramsFor(const RopeSpec& spec, std::uint32_t headDim, DType dtype) {
  spec.validate(headDim);
  return {headDim, spec.dims(headDim), spec.pairing == RopePairing::Interleaved, dtype, 1};
}

void checkTable(const Tensor& invFreq, const RopeStageParams& p) {
  if (invFreq.dtype != DType::F32 || invFreq.numel() != p.rotaryDims / 2) {
    throw UserError("rope.inv_freq", fmt::format("expected {} f32 values (makeRopeTable), got {}", p.rotaryDims / 2,
                                                 invFreq.shapeString()));
  }
}

// Positions pos0 .. pos0 + tokens - 1 are 32-bit in the kernels: they must not wrap.
void requirePositions(std::uint32_t pos0, std::uint32_t tokens, const char* field) {
  if (std::uint64_t(pos0) + tokens > (std::uint64_t(1) << 32)) {
    throw UserError(field, fmt::format("{} tokens from position {} pass 2^32 - 1, the last position a kernel holds",
                                       tokens, pos0));
  }
}

}  // namespace

std::vector<float> ropeTurnsPerPosition(const RopeSpec& spec, std::uint32_t headDim) {
  const auto inv = spec.inverseFrequencies(headDim);
  std::vector<float> turns(inv.size());
  for (std::size_t i = 0; i < inv.size(); ++i) turns[i] = static_cast<float>(inv[i] / (2.0 * std::numbers::pi));
  return turns;
}

Tensor makeRopeTable(Runtime& runtime, const RopeSpec& spec, std::uint32_t headDim) {
  const auto turns = ropeTurnsPerPosition(spec, headDim);
  Tensor t = runtime.allocate("rope_inv_freq", DType::F32, {static_cast<std::int64_t>(turns.size())});
  runtime.upload(t, turns);
  return t;
}

RopeStep::RopeStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets)
    : device_(device), snippets_(std::move(snippets)) {}

const KernelSource& RopeStep::kernelFor(const Tensor& x, const RopeSpec& spec) {
  const RopeStageParams p = paramsFor(spec, static_cast<std::uint32_t>(x.dim(3)), x.dtype);
  const std::string key = RopeStage(RopeStage::Mode::InPlace, p).key();
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    it = cache_.emplace(key, std::make_shared<const KernelSource>(KernelBuilder(device_, snippets_)
                                                                      .workgroup(workgroupFor(device_))
                                                                      .emplace<RopeStage>(RopeStage::Mode::InPlace, p)
                                                                      .build()))
             .first;
  }
  return *it->second;
}

void RopeStep::run(StepContext& ctx, const Tensor& x, const Tensor& invFreq, const RopeSpec& spec, std::uint32_t pos0) {
  const Rows r = rowsOf(x, "x");
  const RopeStageParams p = paramsFor(spec, r.dim, x.dtype);
  checkTable(invFreq, p);
  requirePositions(pos0, r.tokens, "pos0");
  const KernelSource& k = kernelFor(x, spec);
  Arguments a;
  a.bind("x", x).bind("rope_inv_freq", invFreq).set("rope_pos0", pos0);
  a.set("rope_scale", static_cast<float>(spec.attentionScale()));
  a.set("x_stride_b", r.sb).set("x_stride_h", r.sh).set("x_stride_s", r.ss);
  ctx.dispatcher.dispatch(k, a, {r.tokens, r.heads, r.batch});
}

KvAppendStep::KvAppendStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets)
    : device_(device), snippets_(std::move(snippets)) {}

void KvAppendStep::run(StepContext& ctx, const Tensor& kNew, const Tensor& vNew, const Tensor& kCache,
                       const Tensor& vCache, std::uint32_t cachePos, const std::optional<Rope>& rope,
                       const PagedKv* pages) {
  append(ctx, kNew, &vNew, kCache, vCache, cachePos, rope, pages);
}

void KvAppendStep::runKeys(StepContext& ctx, const Tensor& kNew, const Tensor& kCache, std::uint32_t cachePos,
                           const std::optional<Rope>& rope, const PagedKv* pages) {
  if (quantized(kCache.dtype)) {
    throw UnsupportedError(fmt::format("k_cache: appending keys alone to a {} cache: its blocks hold keys and values "
                                       "apart; accepted: f16, bf16, f32", dtypeName(kCache.dtype)));
  }
  append(ctx, kNew, nullptr, kCache, kCache, cachePos, rope, pages);
}

void KvAppendStep::append(StepContext& ctx, const Tensor& kNew, const Tensor* vNewOrNull, const Tensor& kCache,
                          const Tensor& vCache, std::uint32_t cachePos, const std::optional<Rope>& rope,
                          const PagedKv* pages) {
  const Tensor& vNew = vNewOrNull ? *vNewOrNull : kNew;
  // New rows read from the cache they are written into would be overwritten as they are read.
  for (const auto& [in, inRole] : {std::pair{&kNew, "k_new"}, std::pair{&vNew, "v_new"}}) {
    for (const auto& [cache, cacheRole] : {std::pair{&kCache, "k_cache"}, std::pair{&vCache, "v_cache"}}) {
      if (viewsOverlap(*in, *cache)) {
        throw UserError(inRole, fmt::format("'{}' lies in the bytes of {} '{}', which the append writes; new rows "
                                            "come from a tensor of their own", in->name, cacheRole, cache->name));
      }
    }
  }
  // Both caches are written: neither may name an element twice (two heads' rows in one), nor share one
  // with the other (K and V pages may alternate in one pool).
  requireOwnElements(kCache, "k_cache", {});
  if (vNewOrNull) requireOwnElements(vCache, "v_cache", {{&kCache, "k_cache"}});  // else the keys' cache alone
  const Rows k = rowsOf(kNew, "k_new");
  const Rows v = rowsOf(vNew, "v_new");
  // V rows of their own width (value_dim) carry their own strides; rows of K's width share K's.
  const bool ownValues = v.dim != k.dim;
  if (k.batch != v.batch || k.heads != v.heads || k.tokens != v.tokens ||
      (!ownValues && (k.sb != v.sb || k.sh != v.sh || k.ss != v.ss))) {
    throw UserError("v_new", fmt::format("k_new {} and v_new {} must have the same batch, heads and tokens, and the "
                                         "same strides where their rows are as wide", kNew.shapeString(),
                                         vNew.shapeString()));
  }
  if (ownValues && quantized(kCache.dtype)) {
    throw UnsupportedError(fmt::format("v_cache: {} caches with value rows of {} against key rows of {}; accepted: "
                                       "f16, bf16, f32", dtypeName(kCache.dtype), v.dim, k.dim));
  }
  CacheView views[2];
  for (std::size_t i = 0; i < 2; ++i) {  // by index: k and v may be one tensor
    const Tensor* c = i ? &vCache : &kCache;
    const char* role = i ? "v_cache" : "k_cache";
    const std::uint32_t dim = i ? v.dim : k.dim;
    const CacheView cv = views[i] = cacheView(*c, role);
    if ((!pages && cv.batch != k.batch) || cv.heads != k.heads || cv.dim != dim || cv.rowStride < dim) {
      throw UserError(role, fmt::format("'{}' is {}; expected a kv-cache [{}, {}, capacity, {}] (or token-major [{}, "
                                        "capacity, {}, {}]) whose rows do not overlap", c->name, c->shapeString(),
                                        k.batch, k.heads, dim, k.batch, k.heads, dim));
    }
  }
  if (vNew.dtype != kNew.dtype) {
    throw UserError("v_new", fmt::format("'{}' is {} but k_new is {}", vNew.name, dtypeName(vNew.dtype), dtypeName(kNew.dtype)));
  }
  if (vCache.dtype != kCache.dtype) {
    throw UserError("v_cache", fmt::format("mixed formats within one cache: '{}' is {} but '{}' is {}", vCache.name,
                                           dtypeName(vCache.dtype), kCache.name, dtypeName(kCache.dtype)));
  }
  requireStorage(kNew.dtype, device_, "k_new");
  requireStorage(kCache.dtype, device_, "k_cache");
  if (pages) {
    if (views[1].batch != views[0].batch || views[1].capacity != views[0].capacity) {
      throw UserError("v_cache", fmt::format("the pools differ: '{}' is {} but '{}' is {}", kCache.name,
                                             kCache.shapeString(), vCache.name, vCache.shapeString()));
    }
    const PagePool pool{views[0].batch, views[0].capacity};
    requireBlockTable(*pages, k.batch, pool, kCache.dtype);
    requirePagesCover(*pages, pool, std::vector<std::uint32_t>(k.batch, cachePos),
                      std::vector<std::uint64_t>(k.batch, std::uint64_t(cachePos) + k.tokens), true);
  } else if (std::uint64_t(cachePos) + k.tokens > views[0].capacity) {
    throw UserError("kv_len", fmt::format("appending {} tokens at row {} overruns the cache capacity {}", k.tokens,
                                          cachePos, views[0].capacity));
  }
  if (rope) {
    checkTable(rope->invFreq, paramsFor(rope->spec, k.dim, kNew.dtype));
    requirePositions(rope->pos0, k.tokens, "rope.pos0");
  }
  const KernelSource& kernel =
      kernelFor(k.dim, kNew.dtype, rope ? std::optional<RopeSpec>(rope->spec) : std::nullopt, kCache.dtype,
                pages ? views[0].capacity : 0, !vNewOrNull, ownValues ? v.dim : 0);
  Arguments a;
  a.bind("k_new", kNew);
  if (vNewOrNull) {
    a.bind("v_new", vNew);
    bindCaches(a, kCache, vCache, pages);
  } else {
    bindKeyCache(a, kCache, pages);
  }
  a.set("new_stride_b", k.sb).set("new_stride_h", k.sh).set("new_stride_s", k.ss);
  if (ownValues) a.set("v_new_stride_b", v.sb).set("v_new_stride_h", v.sh).set("v_new_stride_s", v.ss);
  a.set("cache_pos0", cachePos);
  if (rope) {
    a.bind("rope_inv_freq", rope->invFreq).set("rope_pos0", rope->pos0);
    a.set("rope_scale", static_cast<float>(rope->spec.attentionScale()));
  }
  if (quantized(kCache.dtype)) {
    a.set("new_tokens", k.tokens);
    if (k.tokens) {
      ctx.dispatcher.dispatch(kernel, a, {KvQuantAppendStage::groupsX(k.dim, kCache.dtype, cachePos, k.tokens), k.heads, k.batch});
    }
    return;
  }
  if (k.tokens) ctx.dispatcher.dispatch(kernel, a, {k.tokens, k.heads, k.batch});
}

const KernelSource& KvAppendStep::kernelFor(std::uint32_t headDim, DType dtype, const std::optional<RopeSpec>& rope,
                                            std::optional<DType> cacheFormat, std::uint32_t pageSize, bool keysOnly,
                                            std::uint32_t valueDim) {
  std::optional<RopeStageParams> rp;
  if (rope) rp = paramsFor(*rope, headDim, dtype);
  const KvAccess access{cacheFormat.value_or(dtype), 1, true, pageSize, keysOnly};
  const bool quant = quantized(access.format);
  const std::string key =
      (quant ? KvQuantAppendStage(headDim, dtype, rp).key()
             : KvAppendStage(headDim, dtype, rp, keysOnly, valueDim).key()) + "_" + access.key();
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    KernelBuilder b(device_, snippets_);
    b.workgroup(quant ? KvQuantAppendStage::kWorkgroup : workgroupFor(device_)).emplace<KvAccessStage>(access);
    if (quant) {
      b.emplace<KvQuantAppendStage>(headDim, dtype, rp);
    } else {
      b.emplace<KvAppendStage>(headDim, dtype, rp, keysOnly, valueDim);
    }
    it = cache_.emplace(key, std::make_shared<const KernelSource>(b.build())).first;
  }
  return *it->second;
}

}  // namespace foundry
