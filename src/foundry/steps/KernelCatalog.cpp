#include "foundry/steps/KernelCatalog.h"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "foundry/KvQuant.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/RopeStep.h"
#include "foundry/steps/SdpaReferenceStep.h"

namespace foundry {

namespace {

AttentionCall shapeCall(const AttentionLayout& l, const Modifiers& mods, std::uint32_t batch, std::uint32_t qLen,
                        std::uint32_t kvLen) {
  AttentionProblem p;
  p.batch = batch;
  p.nHeads = l.nHeads;
  p.nKvHeads = l.nKvHeads;
  p.qLen = qLen;
  p.kvLen = kvLen;
  p.kvCapacity = kvLen;
  p.headDim = l.headDim;
  p.valueDim = l.valueDim;
  AttentionCall c;
  c.q = Tensor::describe("q", l.dtype, p.qDims(Layout::HeadMajor), Layout::HeadMajor);
  c.o = Tensor::describe("o", l.dtype, p.oDims(Layout::HeadMajor), Layout::HeadMajor);
  const DType cache = l.cacheType.value_or(l.dtype);
  c.k = Tensor::describe("k_cache", cache, p.kvDims(), Layout::KvCache);
  if (l.latentValues) {
    c.v = latentValueView(c.k, p.vDim());
  } else {
    c.v = Tensor::describe("v_cache", cache, p.vDims(), Layout::KvCache);
  }
  if (quantized(cache)) {
    for (Tensor* t : {&c.k, &c.v}) t->scales = std::make_shared<Tensor>(scalesShape(*t));
  }
  c.kvLen = kvLen;
  c.scale = l.scale;
  c.modifiers = mods;
  return l.pageSize ? describePagedCaches(std::move(c), l.pageSize) : c;
}

}  // namespace

std::vector<CatalogEntry> attentionKernels(const AttentionLayout& layout, const DeviceInfo& device,
                                           std::shared_ptr<const SnippetLibrary> snippets,
                                           const AttentionOptions& options) {
  std::vector<CatalogEntry> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& role, std::vector<KernelSource> kernels) {
    for (auto& k : kernels) {
      if (seen.insert(k.hash).second) out.push_back({role, std::move(k)});
    }
  };
  FlashAttentionStep flash(device, snippets, options);
  // The Split-K kernels: 4 splits unless a knob says how many, or more where the device's loop limit
  // asks for more (the Selector's own count for the call then).
  const auto splitKnobs = [&](const AttentionCall& call, bool decode) {
    AttentionOptions o = options;
    o.disableFaPrefillSplitK = false;
    std::optional<std::uint32_t>& count = decode ? o.faDecodeSplitK : o.faPrefillSplitK;
    if (!count && device.loopLimit != 0) {
      count = std::max<std::uint32_t>(4, FlashAttentionStep(device, snippets, o).plan(call).splits);
    }
    if (!count) count = 4;
    return o;
  };
  const std::uint32_t longKv = std::max<std::uint32_t>(layout.maxContext, 4096);
  for (const auto& [layers, mods] : layout.modifierSets) {
    const std::string of = layers.empty() ? std::string() : fmt::format(" ({})", layers);
    add("decode" + of, flash.kernelsFor(shapeCall(layout, mods, 1, 1, 256)));
    const AttentionCall longDecode = shapeCall(layout, mods, 1, 1, longKv);
    add("decode split-k" + of, FlashAttentionStep(device, snippets, splitKnobs(longDecode, true)).kernelsFor(longDecode));
    // A decode call taken as a prefill of its GQA groups rotates q apart (RopeStep, below).
    if (layout.rope && !flash.takesGroupRows(shapeCall(layout, mods, 1, 1, 256))) {
      AttentionCall fused = shapeCall(layout, mods, 1, 1, 256);
      const std::uint32_t rotary = layout.rope->dims(layout.headDim);
      fused.rope = FusedRope{*layout.rope, Tensor::describe("rope_inv_freq", DType::F32, {rotary / 2}), 255};
      add("rope->decode" + of, flash.kernelsFor(fused));
    }
    // The flash prefill stages K and V rows of one width: narrower values prefill on the reference path.
    if (!layout.valueDim || layout.valueDim == layout.headDim) {
      add("prefill" + of, flash.kernelsFor(shapeCall(layout, mods, 1, 512, 512)));
      const AttentionCall longPrefill = shapeCall(layout, mods, 1, 16, longKv);
      add("prefill split-k" + of,
          FlashAttentionStep(device, snippets, splitKnobs(longPrefill, false)).kernelsFor(longPrefill));
    }
    add("reference" + of, SdpaReferenceStep(device, snippets).kernelsFor(shapeCall(layout, mods, 1, 128, 128)));
  }
  const AttentionCall prompt = shapeCall(layout, {}, 1, 128, 128);
  if (layout.rope) add("rope", {RopeStep(device, snippets).kernelFor(prompt.q, *layout.rope)});
  const bool ownValues = layout.valueDim && layout.valueDim != layout.headDim && !layout.latentValues;
  add("kv append", {KvAppendStep(device, snippets)
                        .kernelFor(layout.headDim, layout.dtype, layout.rope, layout.cacheType, layout.pageSize,
                                   layout.latentValues, ownValues ? layout.valueDim : 0)});
  return out;
}

}  // namespace foundry
