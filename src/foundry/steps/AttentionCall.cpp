#include "foundry/steps/AttentionCall.h"

#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/KvQuant.h"
#include "foundry/vk/Buffer.h"

namespace foundry {

void requireOwnElements(const Tensor& out, const std::string& role,
                        const std::vector<std::pair<const Tensor*, std::string>>& inputs) {
  if (selfOverlapping(out)) {
    throw UserError(role, fmt::format("'{}' ({}, strides [{}]) names one element at two positions, which two "
                                      "invocations would both write; each position of an output needs an element of "
                                      "its own", out.name, out.shapeString(), fmt::join(out.strides, ", ")));
  }
  for (const auto& [in, inRole] : inputs) {
    if (in && viewsOverlap(out, *in)) {
      throw UserError(role, fmt::format("'{}' shares elements with {} '{}' in buffer '{}': the {} is written while "
                                        "{} is read, so it needs elements of its own", out.name, inRole, in->name,
                                        out.buffer->name(), role, inRole));
    }
  }
}

void requireRank4(const Tensor& t, const std::string& role, const char* lastDim) {
  if (t.rank() != 4) {
    throw UserError(role, fmt::format("tensor '{}' must have 4 dims, has {} ({})", t.name, t.rank(), t.shapeString()));
  }
  // The problem and the kernels count in 32 bits; a larger dimension must not wrap into a small one.
  for (std::size_t i = 0; i < 4; ++i) {
    if (t.dim(i) < 0 || t.dim(i) > std::numeric_limits<std::uint32_t>::max()) {
      throw UserError(role, fmt::format("dimension {} of tensor '{}' is {}; dimensions must be below 2^32 ({})", i,
                                        t.name, t.dim(i), t.shapeString()));
    }
  }
  if (!t.lastDimContiguous()) {
    throw UserError(role, fmt::format("tensor '{}' must be contiguous in {} (last stride 1), has strides [{}]",
                                      t.name, lastDim, fmt::join(t.strides, ", ")));
  }
  for (auto s : t.strides) {
    if (s < 0 || s > std::numeric_limits<std::uint32_t>::max()) {
      throw UnsupportedError(fmt::format("tensor '{}' has stride {}; strides must fit in 32 bits", t.name, s));
    }
  }
}

namespace {

/// (stride_b, stride_h, stride_s) of a Q/O tensor from its layout.
std::array<std::uint32_t, 3> qStrides(const Tensor& t) {
  const auto& s = t.strides;
  if (t.layout == Layout::TokenMajor) return {std::uint32_t(s[0]), std::uint32_t(s[2]), std::uint32_t(s[1])};
  return {std::uint32_t(s[0]), std::uint32_t(s[1]), std::uint32_t(s[2])};
}

}  // namespace

namespace {

// What a quantized format asks of a cache's geometry: q8_0 rows are whole blocks; int8 codes are
// written four to a word and carry a scales tensor of the matching shape.
void requireQuantGeometry(const Tensor& t, const std::string& role, CacheView& view) {
  const bool q8 = t.dtype == DType::Q8_0;
  const std::uint64_t unit = q8 ? 32 : 4;
  const std::pair<const char*, std::uint64_t> geometry[] = {{"head_dim", view.dim}, {"batch stride", view.batchStride},
                                                            {"head stride", view.headStride}, {"row stride", view.rowStride},
                                                            {"offset", t.offset}};
  for (const auto& [what, value] : geometry) {
    if (value % unit != 0) {
      throw UserError(role, fmt::format("'{}' is {}, {}, but its {} is {}; accepted: multiples of {}", t.name,
                                        dtypeName(t.dtype), q8 ? "whose rows are whole blocks of 32 values"
                                                               : "whose codes sit four to a 32-bit word",
                                        what, value, unit));
    }
  }
  if (q8) return;
  if (!t.scales) {
    throw UserError(role, fmt::format("'{}' is int8 but has no scales tensor (Tensor::scales, f16 [{}]; "
                                      "Runtime::allocate makes one)", t.name, fmt::join(scalesShape(t).dims, ", ")));
  }
  const Tensor& sc = *t.scales;
  const Tensor want = scalesShape(t);
  const bool dimsMatch = sc.rank() == 4 && sc.dims[0] == want.dims[0] && sc.dims[1] == want.dims[1] &&
                         sc.dims[2] == want.dims[2] && sc.dims[3] >= want.dims[3];
  if (sc.dtype != DType::F16 || !dimsMatch || sc.layout != t.layout) {
    throw UserError(role, fmt::format("the scales of '{}' are {}; an int8 {} cache needs f16 [{}] {} (one scale per "
                                      "block of 32 keys x 32 dimensions)", t.name, sc.shapeString(), layoutName(t.layout),
                                      fmt::join(want.dims, ", "), layoutName(t.layout)));
  }
  requireRank4(sc, role + ".scales", "head_dim / 32");
  const auto u = [&](std::size_t i) { return static_cast<std::uint32_t>(sc.stride(i)); };
  if (t.layout == Layout::KvCache) {
    view.scaleBatchStride = u(0), view.scaleHeadStride = u(1), view.scaleBlockStride = u(2);
  } else {
    view.scaleBatchStride = u(0), view.scaleHeadStride = u(2), view.scaleBlockStride = u(1);
  }
}

}  // namespace

CacheView cacheView(const Tensor& t, const std::string& role) {
  requireRank4(t, role, role == "v" ? "value_dim" : "head_dim");
  const auto u = [&](std::size_t i) { return static_cast<std::uint32_t>(t.dim(i)); };
  const auto s = [&](std::size_t i) { return static_cast<std::uint32_t>(t.stride(i)); };
  CacheView view;
  if (t.layout == Layout::KvCache) {
    view = {u(0), u(1), u(2), u(3), s(0), s(1), s(2)};
  } else if (t.layout == Layout::TokenMajor) {
    view = {u(0), u(2), u(1), u(3), s(0), s(2), s(1)};
  } else {
    throw UserError(role, fmt::format("tensor '{}' has layout {}; a KV cache is kv-cache [batch, n_kv_heads, capacity, "
                                      "head_dim] or token-major [batch, capacity, n_kv_heads, head_dim]",
                                      t.name, layoutName(t.layout)));
  }
  if (quantized(t.dtype)) requireQuantGeometry(t, role, view);
  return view;
}

std::uint32_t strideAlignment(std::initializer_list<std::uint32_t> strides, std::uint32_t most) {
  std::uint32_t align = most;
  for (auto s : strides) {
    while (align > 1 && s % align != 0) align /= 2;
  }
  return align;
}

AttentionProblem describeCall(const AttentionCall& c) {
  requireRank4(c.q, "q");
  requireRank4(c.o, "o");
  const CacheView kv = cacheView(c.k, "k"), vv = cacheView(c.v, "v");
  for (const auto* t : {&c.q, &c.o}) {
    if (t->layout != Layout::HeadMajor && t->layout != Layout::TokenMajor) {
      throw UserError(t == &c.q ? "q" : "o", fmt::format("tensor '{}' has layout {}; accepted: head-major, token-major",
                                                         t->name, layoutName(t->layout)));
    }
  }
  if (c.v.dtype != c.k.dtype) {
    throw UserError("v", fmt::format("mixed formats within one cache: k '{}' is {} but v '{}' is {}; k and v must "
                                     "share a format", c.k.name, dtypeName(c.k.dtype), c.v.name, dtypeName(c.v.dtype)));
  }
  for (const auto* t : {&c.q, &c.k, &c.o}) {
    const bool cache = t == &c.k;
    if (t->dtype != DType::F16 && t->dtype != DType::BF16 && t->dtype != DType::F32 && !(cache && quantized(t->dtype))) {
      throw UserError(t == &c.q ? "q" : cache ? "k" : "o",
                      fmt::format("tensor '{}' is {}; accepted: f16, bf16, f32{}", t->name, dtypeName(t->dtype),
                                  cache ? ", int8, q8_0" : ""));
    }
  }
  AttentionProblem p;
  p.dtype = c.k.dtype;
  if (c.q.dtype != p.dtype) p.queryType = c.q.dtype;
  if (c.o.dtype != p.dtype) p.outputType = c.o.dtype;
  p.qLayout = c.q.layout;
  p.oLayout = c.o.layout;
  const bool tokenMajor = c.q.layout == Layout::TokenMajor;
  p.batch = static_cast<std::uint32_t>(c.q.dim(0));
  p.qLen = static_cast<std::uint32_t>(c.q.dim(tokenMajor ? 1 : 2));
  p.nHeads = static_cast<std::uint32_t>(c.q.dim(tokenMajor ? 2 : 1));
  p.headDim = static_cast<std::uint32_t>(c.q.dim(3));
  p.nKvHeads = kv.heads;
  p.kvCapacity = kv.capacity;
  p.kvLen = c.kvLen;
  p.causal = c.causal;
  p.scale = c.scale;
  if (p.batch == 0 || p.qLen == 0 || p.nHeads == 0 || p.nKvHeads == 0 || p.headDim == 0) {
    throw UserError("q", fmt::format("empty attention: {}", p.describe()));
  }
  if (kv.batch != vv.batch || kv.heads != vv.heads || kv.capacity != vv.capacity || vv.dim == 0) {
    throw UserError("v", fmt::format("k is [{}] but v is [{}]; the caches must match in batch, n_kv_heads and "
                                     "capacity (the value dim may differ from head_dim)",
                                     fmt::join(c.k.dims, ", "), fmt::join(c.v.dims, ", ")));
  }
  p.valueDim = vv.dim;
  p.valueRow = vv.rowStride;
  if (c.pages) {
    // A pool of pages: its leading dim counts pages, its rows are the page size.
    requireBlockTable(*c.pages, p.batch, {kv.batch, kv.capacity}, p.dtype);
    p.pageSize = kv.capacity;
    p.kvCapacity = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(std::uint64_t(c.pages->maxPages()) * kv.capacity, std::numeric_limits<std::uint32_t>::max()));
  }
  if ((!c.pages && kv.batch != p.batch) || kv.dim != p.headDim) {
    throw UserError("k", fmt::format("k is [{}] but q has batch {} and head_dim {}", fmt::join(c.k.dims, ", "), p.batch,
                                     p.headDim));
  }
  // Rows may sit inside wider rows (a token-major cache, a view of a shared latent cache), but never
  // overlap the next.
  for (const auto& [view, role, width] : {std::tuple{kv, "k", p.headDim}, std::tuple{vv, "v", p.valueDim}}) {
    if (view.rowStride < width) {
      const Tensor& t = role[0] == 'k' ? c.k : c.v;
      throw UserError(role, fmt::format("rows of '{}' are {} elements apart but {} wide: they overlap (strides [{}])",
                                        t.name, view.rowStride, width, fmt::join(t.strides, ", ")));
    }
  }
  p.kvAlign = strideAlignment({kv.batchStride, kv.headStride, kv.rowStride, vv.batchStride, vv.headStride, vv.rowStride},
                              quantized(p.dtype) ? 16 : 8);
  const auto qs = qStrides(c.q);
  p.qAlign = strideAlignment({qs[0], qs[1], qs[2]});
  if (c.o.dims != p.oDims(c.o.layout)) {
    throw UserError("o", fmt::format("o is [{}] but a {} output for q and v needs [{}]", fmt::join(c.o.dims, ", "),
                                     layoutName(c.o.layout), fmt::join(p.oDims(c.o.layout), ", ")));
  }
  if (c.lse) {
    const Tensor& t = *c.lse;
    if (t.dtype != DType::F32) {
      throw UserError("lse", fmt::format("tensor '{}' is {}; the log-sum-exp output is f32", t.name, dtypeName(t.dtype)));
    }
    if (t.dims != p.lseDims() || !t.packed()) {
      throw UserError("lse", fmt::format("tensor '{}' is {}; the log-sum-exp output for q needs packed [{}] "
                                         "[batch, n_heads, q_len]", t.name, t.shapeString(),
                                         fmt::join(p.lseDims(), ", ")));
    }
    p.lse = true;
  }
  // Written by every plan: checked here, not only where a kernel happens to bind it beside what it overlaps.
  requireOwnElements(c.o, "o", {{&c.q, "q"}, {&c.k, "k"}, {&c.v, "v"}});
  if (c.lse) requireOwnElements(*c.lse, "lse", {{&c.q, "q"}, {&c.k, "k"}, {&c.v, "v"}, {&c.o, "o"}});
  if (const std::string why = headGroupProblem(p.nHeads, p.nKvHeads, "n_heads", "n_kv_heads"); !why.empty()) {
    throw UserError("n_heads", why);
  }
  if (c.pages && p.kvLen > p.kvCapacity) {
    throw UserError("kv_len", fmt::format("kv_len {} is past the pages: each row of the block table holds {} pages of "
                                          "{} tokens ({} keys)", p.kvLen, c.pages->maxPages(), p.pageSize, p.kvCapacity));
  }
  if (p.kvLen == 0 || p.kvLen > p.kvCapacity) {
    throw UserError("kv_len", fmt::format("kv_len {} must be in 1..capacity {}", p.kvLen, p.kvCapacity));
  }
  // Queries sit at the cache's last q_len positions, which the causal mask and every modifier read;
  // without them (cross-attention, a ring block of another rank's keys) there may be more queries
  // than keys.
  if (p.qLen > p.kvLen && (c.causal || !c.modifiers.empty())) {
    throw UserError("q_len", fmt::format("q_len {} exceeds kv_len {}: the cache must already hold the new tokens "
                                         "(more queries than keys only without the causal mask and modifiers)",
                                         p.qLen, p.kvLen));
  }
  if (c.rope && !p.decode()) {
    throw UserError("rope", "fused RoPE is a decode feature (q_len 1); rotate prefill queries with RopeStep");
  }
  if (!std::isfinite(p.scale) || p.scale < 0.0f) {
    throw UserError("scale", fmt::format("softmax scale {} must be finite and positive (0: 1/sqrt(head_dim))", p.scale));
  }
  p.modifiers = c.modifiers;
  const ModifierCall mc = p.modifierCall();
  for (const auto& m : p.modifiers) {
    if (!m) throw UserError("modifiers", "a modifier is null");
    m->validate(mc);
  }
  if (c.pages) {
    // Every page a sequence's keys live in must be in the pool; pages past them are never read.
    const ModifierChain chain{p.modifiers};
    std::vector<std::uint32_t> first(p.batch, 0);
    std::vector<std::uint64_t> end(p.batch);
    for (std::uint32_t b = 0; b < p.batch; ++b) end[b] = chain.kvLength(b, p.kvLen);
    requirePagesCover(*c.pages, {kv.batch, p.pageSize}, first, end, false);
  }
  return p;
}

namespace {

// Role `kv` ("k" or "v"): its row strides, and its scales' where it has them.
void setStrides(Arguments& args, const std::string& kv, const Tensor& t) {
  const CacheView c = cacheView(t, kv);
  args.set(kv + "_stride_b", c.batchStride).set(kv + "_stride_h", c.headStride).set(kv + "_stride_s", c.rowStride);
}

void bindCache(Arguments& args, const std::string& kv, const Tensor& t) {
  args.bind(kv + "_cache", t);
  setStrides(args, kv, t);
  if (!t.scales) return;
  const CacheView c = cacheView(t, kv);
  args.bind(kv + "_scales", *t.scales);
  args.set(kv + "_scale_stride_b", c.scaleBatchStride).set(kv + "_scale_stride_h", c.scaleHeadStride);
  args.set(kv + "_scale_stride_s", c.scaleBlockStride);
}

void bindPages(Arguments& args, const PagedKv* pages) {
  if (pages) args.bind("block_table", pages->blockTable).set("block_table_stride", pages->rowStride());
}

}  // namespace

namespace {

// [B, Hq, 1, D] head-major or [B, 1, Hq, D] token-major as [B, Hq / group, group, D] head-major.
Tensor groupRowsView(const Tensor& t, std::uint32_t group) {
  const bool tokenMajor = t.layout == Layout::TokenMajor;
  const std::int64_t heads = t.dim(tokenMajor ? 2 : 1), headStride = t.stride(tokenMajor ? 2 : 1);
  Tensor g = t;
  g.dims = {t.dim(0), heads / group, group, t.dim(3)};
  g.strides = {t.stride(0), headStride * group, headStride, 1};
  g.layout = Layout::HeadMajor;
  return g;
}

}  // namespace

AttentionCall groupRowsCall(const AttentionCall& call, std::uint32_t group) {
  AttentionCall g = call;
  g.q = groupRowsView(call.q, group);
  g.o = groupRowsView(call.o, group);
  if (call.lse) {
    g.lse->dims = {call.lse->dim(0), call.lse->dim(1) / group, group};
    g.lse->strides = Tensor::packedStrides(g.lse->dims);
  }
  g.causal = false;
  return g;
}

AttentionCall describePagedCaches(AttentionCall c, std::uint32_t pageSize, std::uint32_t poolPages,
                                  std::vector<std::uint32_t> table, std::uint32_t maxPages) {
  const auto batch = static_cast<std::uint32_t>(c.k.dim(0));
  if (!maxPages) maxPages = (c.kvLen + pageSize - 1) / pageSize;
  if (!poolPages) poolPages = batch * maxPages;
  if (table.empty()) {
    for (std::uint32_t i = 0; i < batch * maxPages; ++i) table.push_back(poolPages - 1 - i);
  }
  for (Tensor* t : {&c.k, &c.v}) {
    const bool scaled = t->scales != nullptr;
    *t = Tensor::describe(t->name, t->dtype, {poolPages, t->dim(1), pageSize, t->dim(3)}, Layout::KvCache);
    if (scaled) t->scales = std::make_shared<Tensor>(scalesShape(*t));
  }
  c.pages = PagedKv{Tensor::describe("block_table", DType::U32, {batch, maxPages}), std::move(table)};
  return c;
}

Tensor latentValueView(const Tensor& keys, std::uint32_t valueDim) {
  Tensor v = keys;
  v.name = "v_of_" + keys.name;
  v.offset += static_cast<std::uint64_t>(keys.dims.back()) - valueDim;
  v.dims.back() = valueDim;
  return v;
}

void setCacheStrides(Arguments& args, const Tensor& k, const Tensor& v) {
  setStrides(args, "k", k);
  setStrides(args, "v", v);
}

void bindCaches(Arguments& args, const Tensor& k, const Tensor& v, const PagedKv* pages) {
  bindCache(args, "k", k);
  bindCache(args, "v", v);
  bindPages(args, pages);
}

void bindKeyCache(Arguments& args, const Tensor& k, const PagedKv* pages) {
  bindCache(args, "k", k);
  bindPages(args, pages);
}

void bindCaches(Arguments& args, const AttentionCall& call) {
  bindCaches(args, call.k, call.v, call.pages ? &*call.pages : nullptr);
}

void setShapeArguments(Arguments& args, const AttentionProblem& p, const AttentionCall& c) {
  const auto qs = qStrides(c.q), os = qStrides(c.o);
  args.set("n_heads", p.nHeads).set("n_kv_heads", p.nKvHeads).set("q_len", p.qLen).set("kv_len", p.kvLen);
  args.set("q_stride_b", qs[0]).set("q_stride_h", qs[1]).set("q_stride_s", qs[2]);
  args.set("o_stride_b", os[0]).set("o_stride_h", os[1]).set("o_stride_s", os[2]);
  setCacheStrides(args, c.k, c.v);
}

}  // namespace foundry
