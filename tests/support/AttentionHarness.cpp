#include "support/AttentionHarness.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "foundry/KvQuant.h"
#include "foundry/Runtime.h"
#include "foundry/stages/modifiers/AlibiStage.h"
#include "foundry/stages/modifiers/CausalStage.h"
#include "foundry/stages/modifiers/KeyLengthsStage.h"
#include "foundry/stages/modifiers/MaskStage.h"
#include "foundry/stages/modifiers/SinksStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/steps/SdpaReferenceStep.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "support/TestRuntime.h"

namespace foundry::test {

AttentionProblem AttentionCase::problem() const {
  AttentionProblem p;
  p.batch = batch;
  p.nHeads = heads;
  p.nKvHeads = kvHeads;
  p.qLen = qLen;
  p.kvLen = kvLen;
  p.kvCapacity = kvLen + 5;
  p.headDim = headDim;
  p.valueDim = valueDim;
  p.valueRow = valuesInKeys ? headDim : 0;
  p.dtype = dtype;
  if (qType && *qType != dtype) p.queryType = qType;
  if (oType && *oType != dtype) p.outputType = oType;
  p.qLayout = qLayout;
  p.oLayout = oLayout;
  p.causal = causal;
  p.scale = scale;
  return p;
}

AttentionCase attentionCase(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t qLen,
                            std::uint32_t kvLen, std::uint32_t headDim, DType dtype, Layout q, Layout o, bool causal) {
  AttentionCase c;
  c.batch = batch;
  c.heads = heads;
  c.kvHeads = kvHeads;
  c.qLen = qLen;
  c.kvLen = kvLen;
  c.headDim = headDim;
  c.dtype = dtype;
  c.qLayout = q;
  c.oLayout = o;
  c.causal = causal;
  c.seed = qLen * 7919u + kvLen * 31u + heads * 7u + kvHeads + batch * 3u + headDim + (causal ? 0u : 1u);
  return c;
}

std::string AttentionCase::name() const {
  std::string mods;
  for (const auto& m : modifiers) mods += fmt::format("_{}", m.name());
  const std::string values = valueDim ? fmt::format("v{}{}", valueDim, valuesInKeys ? "latent" : "") : "";
  return fmt::format("b{}_h{}_hkv{}_q{}_kv{}_D{}{}_{}_{}{}{}{}{}{}{}", batch, heads, kvHeads, qLen, kvLen, headDim, values,
                     dtypeName(dtype), qLayout == Layout::TokenMajor ? "qtok" : "qhead",
                     oLayout == Layout::TokenMajor ? "_otok" : "", causal ? "" : "_full",
                     magnitude != 1.0f ? fmt::format("_mag{}", static_cast<int>(magnitude)) : "",
                     scale != 0.0f ? fmt::format("_scale{}", static_cast<int>(1.0f / scale)) : "",
                     pokes.empty() ? "" : fmt::format("_pokes{}", pokes.size()), mods) +
         (lse ? "_lse" : "") + (qType ? fmt::format("_q{}", dtypeName(*qType)) : "") +
         (oType ? fmt::format("_o{}", dtypeName(*oType)) : "") + (tokenMajorCache ? "_kvtok" : "") + (pageSize ? fmt::format("_pg{}", pageSize) : "") +
         (valueMagnitude != 1.0f ? fmt::format("_vmag{:.0e}", valueMagnitude) : "");
}

std::string ModifierSpec::name() const {
  auto extent = [](std::uint32_t e) { return e >= SlidingWindowStage::kMaxExtent ? std::string("inf") : std::to_string(e); };
  switch (kind) {
    case Kind::TopLeftCausal: return "tlcausal";
    case Kind::Window: return fmt::format("win{}_{}", extent(left), extent(right));
    case Kind::Alibi: return values.empty() ? "alibi" : "alibigiven";
    case Kind::SoftCap: return fmt::format("cap{}", static_cast<int>(value));
    case Kind::Sinks: return fmt::format("sinks{}", values.size());
    case Kind::KeyLengths: {
      std::string s = "lens";
      for (auto l : lengths) s += fmt::format("_{}", l);
      return s;
    }
    case Kind::AddMask: return fmt::format("addmask{}{}", broadcast ? "bc" : "", maskType == DType::F32 ? "f32" : "");
    case Kind::BitMask: return fmt::format("bitmask{}", broadcast ? "bc" : "");
    case Kind::Custom: return label;
  }
  return "?";
}

ModifierSpec topLeftCausal() { return {.kind = ModifierSpec::Kind::TopLeftCausal}; }
ModifierSpec window(std::uint32_t left, std::uint32_t right) {
  return {.kind = ModifierSpec::Kind::Window, .left = left, .right = right};
}
ModifierSpec alibi(std::vector<double> slopes) { return {.kind = ModifierSpec::Kind::Alibi, .values = std::move(slopes)}; }
ModifierSpec softCap(double cap) { return {.kind = ModifierSpec::Kind::SoftCap, .value = cap}; }
ModifierSpec sinks(std::vector<double> logits) { return {.kind = ModifierSpec::Kind::Sinks, .values = std::move(logits)}; }
ModifierSpec keyLengths(std::vector<std::uint32_t> lengths) {
  return {.kind = ModifierSpec::Kind::KeyLengths, .lengths = std::move(lengths)};
}
ModifierSpec additiveMask(bool broadcast, DType type) {
  return {.kind = ModifierSpec::Kind::AddMask, .broadcast = broadcast, .maskType = type};
}
ModifierSpec bitMask(bool broadcast) { return {.kind = ModifierSpec::Kind::BitMask, .broadcast = broadcast}; }
ModifierSpec custom(std::string label, std::function<ModifierPtr(Runtime&, const AttentionProblem&)> make) {
  return {.kind = ModifierSpec::Kind::Custom, .label = std::move(label), .make = std::move(make)};
}

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name(); }

// About six units of rounding of the format the output is stored in (bf16 keeps 8 bits, f16 11).
// Quantized caches are compared with their dequantized values: f16's bound (q and o are f16 at best).
double relativeBound(DType dtype) { return dtype == DType::F32 ? 1e-4 : dtype == DType::BF16 ? 1.2e-2 : 3e-3; }

double quantizationBound(DType dtype) { return quantized(dtype) ? kQuantizedAttentionBound : 0.0; }

double relativeBound(const AttentionCase& c, const AttentionResult& r) {
  const bool halfPartials = r.record.plan.decode && !r.record.kernels.empty() &&
                            r.record.plan.decodeVariant.partial == PartialStorage::Half;
  double bound = relativeBound(halfPartials ? DType::F16 : c.dtype);
  for (const auto& t : {c.qType, c.oType}) bound = std::max(bound, t ? relativeBound(*t) : 0.0);
  return bound + 4.0 * std::ldexp(1.0, -24) * r.maxAbsLogit;
}

namespace {

struct Inputs {
  AttentionCall call;
  std::vector<float> q, k, v;  // as the device holds them (rounded to the dtype, or dequantized)
  std::vector<float> kExact, vExact;  // quantized caches: the values before quantization
};

PerHeadValues perHead(Runtime& rt, const std::string& name, std::vector<double> cycle, std::uint32_t heads) {
  PerHeadValues out;
  for (std::uint32_t h = 0; h < heads; ++h) out.values.push_back(cycle[h % cycle.size()]);
  out.tensor = rt.allocate(name, DType::F32, {heads});
  rt.upload(out.tensor, std::vector<float>(out.values.begin(), out.values.end()));
  return out;
}

// Whether mask element (b, h, i, k) of a case's drawn mask is visible; `u` is a uniform draw for it.
bool drawnVisible(std::uint32_t i, std::uint32_t k, float u) { return i != 0 && !(k >= 16 && k < 48) && u > 0.25f; }

ModifierPtr makeMask(Runtime& rt, const AttentionCase& c, const ModifierSpec& m) {
  const std::uint32_t mb = m.broadcast ? 1 : c.batch, mh = m.broadcast ? 1 : c.heads;
  const std::size_t rows = std::size_t(mb) * mh * c.qLen;
  const auto u = randomVector(rows * c.kvLen, c.seed * 5 + 11, 0.0f, 1.0f);
  if (m.kind == ModifierSpec::Kind::BitMask) {
    const std::uint32_t words = (c.kvLen + 31) / 32 + 1;  // one spare word: rows longer than needed
    std::vector<std::uint32_t> bits(rows * words, 0u);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::uint32_t k = 0; k < c.kvLen; ++k) {
        if (drawnVisible(r % c.qLen, k, u[r * c.kvLen + k])) bits[r * words + k / 32] |= 1u << (k % 32);
      }
    }
    const Tensor t = rt.allocate("mask_bits", DType::U32, {mb, mh, c.qLen, words});
    rt.upload(t, std::span<const std::uint32_t>(bits));
    return MaskStage::bits(t, bits);
  }
  const std::uint32_t cols = c.kvLen + 3;  // rows longer than kv_len
  std::vector<float> add(rows * cols, 0.0f);
  const auto values = randomVector(rows * cols, c.seed * 5 + 12, -1.5f, 1.5f);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::uint32_t k = 0; k < cols; ++k) {
      const bool visible = k < c.kvLen ? drawnVisible(r % c.qLen, k, u[r * c.kvLen + k]) : false;
      // Hidden keys alternate between -inf and f16's lowest, both of which hide.
      add[r * cols + k] = visible ? values[r * cols + k] : ((r + k) % 2 ? -INFINITY : -kHalfMax);
    }
  }
  add = decodeElements(encodeElements(add, m.maskType), m.maskType);
  const Tensor t = rt.allocate("mask_add", m.maskType, {mb, mh, c.qLen, cols});
  rt.upload(t, add);
  return MaskStage::additive(t, add);
}

Modifiers makeModifiers(Runtime& rt, const AttentionCase& c) {
  Modifiers out;
  const AttentionProblem p = c.problem();
  for (const auto& m : c.modifiers) {
    switch (m.kind) {
      case ModifierSpec::Kind::TopLeftCausal:
        out.push_back(std::make_shared<CausalStage>(CausalStage::Align::TopLeft));
        break;
      case ModifierSpec::Kind::Window: out.push_back(std::make_shared<SlidingWindowStage>(m.left, m.right)); break;
      case ModifierSpec::Kind::Alibi:
        out.push_back(std::make_shared<AlibiStage>(
            perHead(rt, "alibi_slopes", m.values.empty() ? AlibiStage::alibiSlopes(c.heads) : m.values, c.heads)));
        break;
      case ModifierSpec::Kind::SoftCap: out.push_back(std::make_shared<SoftCapStage>(m.value)); break;
      case ModifierSpec::Kind::Sinks:
        out.push_back(std::make_shared<SinksStage>(perHead(rt, "attn_sinks", m.values, c.heads)));
        break;
      case ModifierSpec::Kind::KeyLengths: {
        const Tensor t = rt.allocate("kv_lengths", DType::U32, {c.batch});
        rt.upload(t, std::span<const std::uint32_t>(m.lengths));
        out.push_back(std::make_shared<KeyLengthsStage>(t, m.lengths));
        break;
      }
      case ModifierSpec::Kind::AddMask:
      case ModifierSpec::Kind::BitMask: out.push_back(makeMask(rt, c, m)); break;
      case ModifierSpec::Kind::Custom: out.push_back(m.make(rt, p)); break;
    }
  }
  return out;
}

// The keys sequence b holds: its own length with per-sequence lengths.
std::uint32_t keysOf(const AttentionCase& c, std::uint32_t b) {
  for (const auto& m : c.modifiers) {
    if (m.kind == ModifierSpec::Kind::KeyLengths) return m.lengths.at(b);
  }
  return c.kvLen;
}

// Quantized caches are rounded block by block as they are uploaded (makeInputs reads them back).
std::vector<float> rounded(std::vector<float> x, DType dtype) {
  return quantized(dtype) ? x : decodeElements(encodeElements(x, dtype), dtype);
}

// The case's device cache: [B, Hkv, capacity] in place or [B, capacity, Hkv] token-major; paged, each
// sequence's page i at pool page pages - 1 - (b * maxPages + i) (the pages in reverse order), page 0
// spare (all NaN).
struct CacheGeometry {
  explicit CacheGeometry(const AttentionCase& c) : p(c.problem()) {
    rows = {p.nKvHeads, p.kvCapacity, c.tokenMajorCache, c.pageSize, 0, {}};
    if (!c.pageSize) return;
    rows.maxPages = (p.kvCapacity + c.pageSize - 1) / c.pageSize;
    pages = p.batch * rows.maxPages + 1;
    for (std::uint32_t i = 0; i < p.batch * rows.maxPages; ++i) rows.table.push_back(pages - 1 - i);
  }
  std::vector<std::int64_t> dims(std::uint32_t dim) const {
    const std::int64_t seqs = rows.pageSize ? pages : p.batch, rowsPer = rows.pageSize ? rows.pageSize : p.kvCapacity;
    if (rows.tokenMajor) return {seqs, rowsPer, p.nKvHeads, dim};
    return {seqs, p.nKvHeads, rowsPer, dim};
  }
  std::size_t deviceRows() const {
    return rows.pageSize ? std::size_t(pages) * p.nKvHeads * rows.pageSize : std::size_t(p.batch) * p.nKvHeads * p.kvCapacity;
  }
  std::size_t hostRows() const { return std::size_t(p.batch) * p.nKvHeads * p.kvCapacity; }
  AttentionProblem p;
  PackedCacheRows rows;
  std::uint32_t pages = 0;
};

Inputs makeInputs(Runtime& rt, const AttentionCase& c) {
  const AttentionProblem p = c.problem();
  Inputs in;
  const std::size_t qn = std::size_t(p.batch) * p.nHeads * p.qLen * p.headDim;
  const std::size_t kvn = std::size_t(p.batch) * p.nKvHeads * p.kvCapacity * p.headDim;
  const std::size_t vn = kvn / p.headDim * p.vDim();
  in.q = rounded(randomVector(qn, c.seed * 3 + 1, -c.magnitude, c.magnitude), c.qType.value_or(c.dtype));
  in.k = rounded(randomVector(kvn, c.seed * 3 + 2, -c.magnitude, c.magnitude), c.dtype);
  in.v = rounded(randomVector(vn, c.seed * 3 + 3, -c.valueMagnitude, c.valueMagnitude), c.dtype);
  // Rows past each sequence's keys hold NaN: any kernel that reads them poisons its output.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    for (std::uint32_t h = 0; h < p.nKvHeads; ++h) {
      for (std::uint32_t s = keysOf(c, b); s < p.kvCapacity; ++s) {
        for (std::uint32_t d = 0; d < p.headDim; ++d) in.k[kvIndex(p, b, h, s) + d] = nan;
        for (std::uint32_t d = 0; d < p.vDim(); ++d) in.v[vIndex(p, b, h, s) + d] = nan;
      }
    }
  }
  for (const auto& poke : c.pokes) {
    std::vector<float>& x = poke.operand == Operand::Q ? in.q : (poke.operand == Operand::K ? in.k : in.v);
    const std::size_t row = poke.operand == Operand::Q   ? qIndex(p, c.qLayout, poke.batch, poke.head, poke.token)
                            : poke.operand == Operand::K ? kvIndex(p, poke.batch, poke.head, poke.token)
                                                         : vIndex(p, poke.batch, poke.head, poke.token);
    for (std::uint32_t d = 0; d < (poke.operand == Operand::V ? p.vDim() : p.headDim); ++d) {
      if (!poke.dim || *poke.dim == d) x.at(row + d) = poke.value;
    }
  }
  in.call.q = rt.allocate("q", c.qType.value_or(c.dtype), p.qDims(c.qLayout), c.qLayout);
  in.call.o = rt.allocate("o", c.oType.value_or(c.dtype), p.oDims(c.oLayout), c.oLayout);
  rt.upload(in.call.q, in.q);
  const CacheGeometry g(c);
  // The host arrays stay [B, Hkv, capacity, D] for the CPU reference; the device holds them in the
  // case's layout (and pages).
  auto toDevice = [&](const char* name, const std::vector<float>& x, std::uint32_t dim) {
    const Tensor t = rt.allocate(name, c.dtype, g.dims(dim), c.tokenMajorCache ? Layout::TokenMajor : Layout::KvCache);
    rt.upload(t, g.rows.toDevice(x, dim, g.deviceRows(), std::numeric_limits<float>::quiet_NaN()));
    return t;
  };
  in.call.k = toDevice("k_cache", in.k, p.headDim);
  if (c.valuesInKeys) {
    // The values are the keys' leading columns, read in place: what the CPU sees is that slice.
    in.call.v = in.call.k;
    in.call.v.name = "v_in_k_cache";
    in.call.v.dims[3] = p.vDim();
    for (std::size_t r = 0; r < vn / p.vDim(); ++r) {
      std::copy_n(in.k.begin() + r * p.headDim, p.vDim(), in.v.begin() + r * p.vDim());
    }
  } else {
    in.call.v = toDevice("v_cache", in.v, p.vDim());
  }
  if (c.pageSize) {
    const Tensor table = rt.allocate("block_table", DType::U32, {p.batch, g.rows.maxPages});
    rt.upload(table, std::span<const std::uint32_t>(g.rows.table));
    in.call.pages = PagedKv{table, g.rows.table};
  }
  if (quantized(c.dtype)) {
    // What the kernels see is the dequantized cache: the reference's inputs. The values before
    // quantization stay for the bound against them.
    in.kExact = in.k, in.vExact = in.v;
    auto readBack = [&](const Tensor& t, std::vector<float>& x, std::uint32_t dim) {
      x = g.rows.fromDevice(rt.download(t), dim, g.hostRows());
    };
    readBack(in.call.k, in.k, p.headDim);
    if (c.valuesInKeys) {
      for (std::size_t r = 0; r < vn / p.vDim(); ++r) std::copy_n(in.k.begin() + r * p.headDim, p.vDim(), in.v.begin() + r * p.vDim());
    } else {
      readBack(in.call.v, in.v, p.vDim());
    }
  }
  rt.poison(in.call.o);
  if (c.lse) {
    in.call.lse = rt.allocate("lse", DType::F32, p.lseDims());
    rt.poison(*in.call.lse);
  }
  in.call.kvLen = p.kvLen;
  in.call.causal = c.causal;
  in.call.scale = c.scale;
  in.call.modifiers = makeModifiers(rt, c);
  return in;
}

AttentionResult finish(Runtime& rt, const AttentionCase& c, Inputs& in, StepRecord record,
                       const std::vector<float>& qForReference) {
  AttentionResult r;
  r.record = std::move(record);
  r.got = rt.download(in.call.o);
  AttentionProblem p = c.problem();
  p.modifiers = in.call.modifiers;
  r.want = cpuAttention(p, qForReference, in.k, in.v, c.lse ? &r.lseWant : nullptr);
  if (!in.kExact.empty()) r.errorUnquantized = compareOutputs(r.got, cpuAttention(p, qForReference, in.kExact, in.vExact));
  if (c.lse) r.lseGot = rt.download(*in.call.lse);
  r.error = compareOutputs(r.got, r.want);
  r.maxAbsLogit = maxAbsLogit(p, qForReference, in.k);
  return r;
}

// Decode queries rotated at their sequence's last position (vector i of [B, H or 1, ...] is batch i / H).
std::vector<float> ropedQuery(const AttentionCase& c, const RopeSpec& rope, std::vector<float> q) {
  std::vector<std::uint32_t> pos(q.size() / c.headDim);
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = keysOf(c, static_cast<std::uint32_t>(i / c.heads)) - 1;
  cpuRope(rope, c.headDim, q, pos);
  return q;
}

}  // namespace

AttentionResult runFlash(const AttentionCase& c, const AttentionOptions& options, const std::optional<RopeSpec>& rope) {
  Runtime& rt = runtime();
  Inputs in = makeInputs(rt, c);
  std::vector<float> qRef = in.q;
  if (rope) {
    const Tensor table = makeRopeTable(rt, *rope, c.headDim);
    in.call.rope = FusedRope{*rope, table, c.kvLen - 1};
    qRef = ropedQuery(c, *rope, in.q);
  }
  FlashAttentionStep step(rt.info(), rt.snippets(), options);
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  // The probe's tensor, zeroed first so a record the kernel never wrote shows.
  std::optional<Tensor> probeWords;
  if (const AttentionPlan plan = step.plan(in.call); plan.probed()) {
    probeWords = FlashAttentionStep::probeRecords(workspace, plan);
    probeWords->buffer->fill(0u);
  }
  StepRecord record = step.run(ctx, in.call);
  dispatcher->submit();
  AttentionResult r = finish(rt, c, in, std::move(record), qRef);
  if (probeWords) {
    r.probeWords.resize(static_cast<std::size_t>(probeWords->numel()));
    probeWords->buffer->download(std::as_writable_bytes(std::span(r.probeWords)), probeWords->offset * 4);
  }
  return r;
}

std::vector<AttentionResult> runFlashSequence(const std::vector<std::pair<AttentionCase, AttentionOptions>>& calls) {
  Runtime& rt = runtime();
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  std::vector<Inputs> inputs;
  std::vector<StepRecord> records;
  for (const auto& [c, options] : calls) {
    inputs.push_back(makeInputs(rt, c));
    FlashAttentionStep step(rt.info(), rt.snippets(), options);
    records.push_back(step.run(ctx, inputs.back().call));
  }
  dispatcher->submit();
  std::vector<AttentionResult> out;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    out.push_back(finish(rt, calls[i].first, inputs[i], std::move(records[i]), inputs[i].q));
  }
  return out;
}

AttentionResult runRopeThenFlash(const AttentionCase& c, const AttentionOptions& options, const RopeSpec& rope) {
  Runtime& rt = runtime();
  Inputs in = makeInputs(rt, c);
  const Tensor table = makeRopeTable(rt, rope, c.headDim);
  RopeStep ropeStep(rt.info(), rt.snippets());
  FlashAttentionStep step(rt.info(), rt.snippets(), options);
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  // Decode: every query sits at kv_len - 1 (q_len is 1).
  ropeStep.run(ctx, in.call.q, table, rope, c.kvLen - c.qLen);
  StepRecord record = step.run(ctx, in.call);
  dispatcher->submit();
  return finish(rt, c, in, std::move(record), ropedQuery(c, rope, in.q));
}

bool tensorCoreDecode(const DeviceInfo& device, DType kv) {
  return DecodeVariant::tensorCoresUnavailable(device, kv).empty();
}

AttentionResult runReference(const AttentionCase& c) {
  Runtime& rt = runtime();
  Inputs in = makeInputs(rt, c);
  SdpaReferenceStep step(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  StepRecord record = step.run(ctx, in.call);
  dispatcher->submit();
  return finish(rt, c, in, std::move(record), in.q);
}

std::string describe(const AttentionCase& c, const AttentionResult& r) {
  std::string kernels;
  for (const auto& k : r.record.kernels) kernels += " " + k;
  return fmt::format("{}: max-abs {:.3g}, relative {:.3g} (bound {:.2g}), non-finite {}, worst index {} "
                     "(got {} want {}); max |logit| {:.3g}; plan: {}; kernels:{}",
                     c.name(), r.error.maxAbs, r.error.maxRel, relativeBound(c, r), r.error.nonFinite,
                     r.error.worstIndex, r.got.empty() ? 0.0f : r.got[r.error.worstIndex],
                     r.want.empty() ? 0.0 : r.want[r.error.worstIndex], r.maxAbsLogit, r.record.plan.describe(),
                     kernels);
}

double lseBound(const AttentionCase& c, const AttentionResult& r) {
  return relativeBound(c, r) * std::max(1.0, r.maxAbsLogit);
}

std::string lseMismatch(const std::vector<float>& got, const std::vector<double>& want, double bound) {
  if (got.size() != want.size()) return fmt::format("{} log-sum-exps, {} expected", got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool none = std::isinf(want[i]) && want[i] < 0;
    const bool ok = none ? std::isinf(got[i]) && got[i] < 0 : std::isfinite(got[i]) && std::abs(got[i] - want[i]) <= bound;
    if (!ok) return fmt::format("log-sum-exp of row {} is {}, want {} (bound {:.2g})", i, got[i], want[i], bound);
  }
  return "";
}

::testing::AssertionResult matchesReference(const AttentionCase& c, const AttentionResult& r) {
  if (r.got.size() != r.want.size() || r.error.nonFinite != 0 || !(r.error.maxRel <= relativeBound(c, r))) {
    return ::testing::AssertionFailure() << describe(c, r);
  }
  if (c.lse) {
    if (const std::string bad = lseMismatch(r.lseGot, r.lseWant, lseBound(c, r)); !bad.empty()) {
      return ::testing::AssertionFailure() << bad << "; " << describe(c, r);
    }
  }
  return ::testing::AssertionSuccess();
}

ErrorStats compareDeviceResults(const AttentionResult& a, const AttentionResult& b) {
  const std::vector<double> want(b.got.begin(), b.got.end());
  return compareOutputs(a.got, want);
}

std::string optionsName(const AttentionOptions& o) {
  std::vector<std::string> parts;
  if (o.faDecodeWarps) parts.push_back(fmt::format("w{}", *o.faDecodeWarps));
  if (o.faDecodeKeysPerWarp) parts.push_back(fmt::format("k{}", *o.faDecodeKeysPerWarp));
  if (o.faDecodeUnroll) parts.push_back(fmt::format("u{}", *o.faDecodeUnroll));
  if (o.faDecodeVectorWidth) parts.push_back(fmt::format("v{}", *o.faDecodeVectorWidth));
  if (o.faDecodeScalar) parts.push_back("scalar");
  if (o.faDecodeQueryShared != Force::Auto) parts.push_back(o.faDecodeQueryShared == Force::On ? "qshared" : "qregs");
  if (o.faDecodeIdleLanes != Force::Auto) parts.push_back(o.faDecodeIdleLanes == Force::On ? "idle" : "noidle");
  if (o.faDecodeTailWords != Force::Auto) parts.push_back(o.faDecodeTailWords == Force::On ? "tail" : "notail");
  if (o.faDecodeScatter != Force::Auto) parts.push_back(o.faDecodeScatter == Force::On ? "scatter" : "noscatter");
  if (o.faDecodeLazyRescale != Force::Auto) parts.push_back(o.faDecodeLazyRescale == Force::On ? "lazy" : "nolazy");
  if (o.faDecodeTensorCores != Force::Auto) parts.push_back(o.faDecodeTensorCores == Force::On ? "tc" : "notc");
  if (o.faDecodeTgOut) parts.push_back(std::string(partialStorageName(*o.faDecodeTgOut)));
  if (o.faDecodeSplitK) parts.push_back(fmt::format("sk{}", *o.faDecodeSplitK));
  if (o.faDecodeFusedReduce != Force::Auto) parts.push_back(o.faDecodeFusedReduce == Force::On ? "merged" : "reducekernel");
  if (o.faDecodeBatchedMerge != Force::Auto) parts.push_back(o.faDecodeBatchedMerge == Force::On ? "batched" : "unbatched");
  if (o.faDecodeClaimedKeys) parts.push_back(fmt::format("claims{}", *o.faDecodeClaimedKeys));
  if (o.faPrefillKeysPerTile) parts.push_back(fmt::format("bc{}", *o.faPrefillKeysPerTile));
  if (o.faPrefillWarps) parts.push_back(fmt::format("pw{}", *o.faPrefillWarps));
  if (o.faPrefillSplitK) parts.push_back(fmt::format("psk{}", *o.faPrefillSplitK));
  if (o.disableFaPrefillSplitK) parts.push_back("nopsk");
  if (o.faPrefillCoopMat != Force::Auto) parts.push_back(o.faPrefillCoopMat == Force::On ? "coopmat" : "nocoopmat");
  if (o.faPrefillHeadsFirst != Force::Auto) parts.push_back(o.faPrefillHeadsFirst == Force::On ? "headsfirst" : "tilesfirst");
  if (o.faPrefillMaskSplit != Force::Auto) parts.push_back(o.faPrefillMaskSplit == Force::On ? "masksplit" : "maskflag");
  if (o.faPrefillRegisterSoftmax != Force::Auto) {
    parts.push_back(o.faPrefillRegisterSoftmax == Force::On ? "regsoftmax" : "sharedsoftmax");
  }
  if (o.faPrefillStages) parts.push_back(fmt::format("st{}", *o.faPrefillStages));
  if (o.faPrefillLoader != Force::Auto) parts.push_back(o.faPrefillLoader == Force::On ? "loader" : "noloader");
  if (o.faPrefillCoopMat2 == Force::On) parts.push_back("coopmat2");
  if (o.faPrefillCoopMat2Subgroup) parts.push_back(*o.faPrefillCoopMat2Subgroup ? "sgscope" : "wgscope");
  if (o.faPrefillProbe) parts.push_back("probe");
  if (parts.empty()) return "auto";
  std::string s = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) s += "_" + parts[i];
  return s;
}

std::string gtestSafe(std::string text) {
  for (char& ch : text) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return text;
}

std::string ropeName(const RopeSpec& spec) {
  return fmt::format("{}{}{}{}", spec.pairing == RopePairing::RotateHalf ? "neox" : "gptj",
                     spec.rotaryDims ? fmt::format("_r{}", spec.rotaryDims) : "", spec.llama3 ? "_llama3" : "",
                     spec.theta != 10000.0 ? fmt::format("_theta{}", static_cast<long long>(spec.theta)) : "");
}

}  // namespace foundry::test
