#pragma once
// RoPE on its own: rotates a Q or K tensor ([B, H, S, D] head-major or [B, S, H, D] token-major) in
// place, token t at position pos0 + t. makeRopeTable uploads the inverse frequencies every RoPE kernel
// reads.
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "foundry/DeviceInfo.h"
#include "foundry/KernelSource.h"
#include "foundry/SnippetLibrary.h"
#include "foundry/steps/AttentionProblem.h"
#include "foundry/steps/PagedKv.h"
#include "foundry/steps/StepContext.h"

namespace foundry {

class Runtime;

/// The f32 table of inverse frequencies in turns per position (inv_freq / 2 pi), computed in double.
std::vector<float> ropeTurnsPerPosition(const RopeSpec& spec, std::uint32_t headDim);
Tensor makeRopeTable(Runtime& runtime, const RopeSpec& spec, std::uint32_t headDim);

class RopeStep {
 public:
  RopeStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

  /// Rotates `x` in place. `invFreq` comes from makeRopeTable for the same spec and head_dim.
  void run(StepContext& ctx, const Tensor& x, const Tensor& invFreq, const RopeSpec& spec, std::uint32_t pos0);
  const KernelSource& kernelFor(const Tensor& x, const RopeSpec& spec);

 private:
  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  std::map<std::string, std::shared_ptr<const KernelSource>> cache_;
};

/// Writes new K/V rows into the caches at `cachePos`, rotating K at positions ropePos0 + t if asked.
class KvAppendStep {
 public:
  KvAppendStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets);

  struct Rope {
    RopeSpec spec;
    Tensor invFreq;
    std::uint32_t pos0 = 0;
  };
  /// kNew/vNew: [B, Hkv, T, D] head-major or [B, T, Hkv, D] token-major (vNew's D may be value_dim,
  /// float caches only); caches kv-cache [B, Hkv,
  /// capacity, D] or token-major [B, capacity, Hkv, D], k and v in one format (f16, bf16, f32, int8,
  /// q8_0), which may differ from the new rows'. With `pages`, the caches are pools of pages and
  /// sequence b's rows go to the pages its row of the block table names (each sequence its own pages).
  void run(StepContext& ctx, const Tensor& kNew, const Tensor& vNew, const Tensor& kCache, const Tensor& vCache,
           std::uint32_t cachePos, const std::optional<Rope>& rope, const PagedKv* pages = nullptr);
  /// New key rows only, for a cache whose values are a view of its key rows (absorbed MLA's latent
  /// rows: the values are their last value_dim columns). f16, bf16 or f32 caches.
  void runKeys(StepContext& ctx, const Tensor& kNew, const Tensor& kCache, std::uint32_t cachePos,
               const std::optional<Rope>& rope, const PagedKv* pages = nullptr);
  /// The kernel for new rows of `dtype` into a cache of `cacheFormat` (default: the same), paged when
  /// `pageSize` is not 0; with `keysOnly`, the kernel runKeys dispatches; `valueDim` not 0: V rows of
  /// that width, with strides of their own.
  const KernelSource& kernelFor(std::uint32_t headDim, DType dtype, const std::optional<RopeSpec>& rope,
                                std::optional<DType> cacheFormat = std::nullopt, std::uint32_t pageSize = 0,
                                bool keysOnly = false, std::uint32_t valueDim = 0);

 private:
  /// run() and runKeys(): `vNew` null for keys only (vCache is then the key cache again).
  void append(StepContext& ctx, const Tensor& kNew, const Tensor* vNew, const Tensor& kCache, const Tensor& vCache,
              std::uint32_t cachePos, const std::optional<Rope>& rope, const PagedKv* pages);

  const DeviceInfo& device_;
  std::shared_ptr<const SnippetLibrary> snippets_;
  std::map<std::string, std::shared_ptr<const KernelSource>> cache_;
};

}  // namespace foundry
