#pragma once
// Every kernel an attention layout builds on a device: decode (plain and Split-K), fused
// RoPE -> decode, prefill (plain and Split-K), RoPE, KV append and the reference path, for the shapes
// that make each appear. Used by `foundry kernels` and the compile-only tests.
#include <string>
#include <vector>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/steps/AttentionOptions.h"
#include "foundry/steps/AttentionProblem.h"

namespace foundry {

struct AttentionLayout {
  std::uint32_t nHeads = 32;
  std::uint32_t nKvHeads = 8;
  std::uint32_t headDim = 128;
  std::uint32_t valueDim = 0;   ///< of values and outputs; 0: headDim. Narrower: the prompt runs materialised
  bool latentValues = false;    ///< the values are the last valueDim columns of each key row (absorbed MLA)
  DType dtype = DType::F16;
  std::optional<DType> cacheType;  ///< of the K/V caches (f16, bf16, f32, int8, q8_0); none: dtype
  std::uint32_t pageSize = 0;      ///< the caches in pools of pages of this many rows; 0: contiguous
  std::optional<RopeSpec> rope = RopeSpec{};  ///< none: no RoPE kernels, no fused RoPE decode
  std::uint32_t maxContext = 8192;
  float scale = 0.0f;                         ///< the softmax scale (0: 1/sqrt(head_dim))
  /// The distinct modifier lists of the layers, each named (e.g. "layers 0, 2"); one empty list
  /// when the model has none.
  std::vector<std::pair<std::string, Modifiers>> modifierSets = {{"", {}}};
};

struct CatalogEntry {
  std::string role;  ///< "decode", "decode split-k", "rope->decode", "prefill", ... (and the layers they serve)
  KernelSource kernel;
};

std::vector<CatalogEntry> attentionKernels(const AttentionLayout& layout, const DeviceInfo& device,
                                           std::shared_ptr<const SnippetLibrary> snippets,
                                           const AttentionOptions& options);

}  // namespace foundry
