#pragma once
// Attention described as plain data — shapes, dtypes, layouts, masking, an optional fused RoPE —
// apart from how it runs (STYLE 1). Steps and the Selector choose kernels from this.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foundry/DType.h"
#include "foundry/Tensor.h"
#include "foundry/stages/AttentionModifier.h"
#include "foundry/steps/ShapeRules.h"

namespace foundry {

enum class RopePairing {
  RotateHalf,   ///< Llama / NeoX: dimension i pairs with i + rotary_dims / 2
  Interleaved,  ///< GPT-J: dimension 2i pairs with 2i + 1
};
std::string_view ropePairingName(RopePairing pairing);

/// Llama 3.1 frequency scaling (rope_type "llama3").
struct Llama3Scaling {
  double factor = 8.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  double originalMaxPosition = 8192.0;
};

/// YaRN frequency scaling as Hugging Face computes it (rope_type "yarn": gpt-oss, Qwen's long
/// context): frequencies blended between interpolated and extrapolated by a ramp over the dimensions
/// whose wavelengths lie between beta_fast and beta_slow rotations of the original context, and the
/// rotated part of q and k scaled by an attention factor.
struct YarnScaling {
  double factor = 1.0;
  double originalMaxPosition = 4096.0;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  bool truncate = true;                     ///< round the ramp's ends to whole dimensions
  std::optional<double> attentionFactor;    ///< default: mscale ratio, or 0.1 ln(factor) + 1
  std::optional<double> mscale, mscaleAllDim;
};

struct RopeSpec {
  RopePairing pairing = RopePairing::RotateHalf;
  std::uint32_t rotaryDims = 0;  ///< 0 means all of head_dim; fewer for partial rotary (Pythia)
  double theta = 10000.0;
  std::optional<Llama3Scaling> llama3;
  std::optional<YarnScaling> yarn;

  /// UserError naming the field ("rope.theta", "rope.yarn.factor", ...) unless the spec gives finite
  /// frequencies for `headDim`: an even rotated count in 2..headDim, theta above 0, at most one scaling,
  /// its factors and lengths above 0 (llama3's high_freq_factor above its low_freq_factor).
  void validate(std::uint32_t headDim) const;
  /// Inverse frequencies, rotaryDims / 2 of them, computed in double (scaling applied); validates first.
  std::vector<double> inverseFrequencies(std::uint32_t headDim) const;
  /// What the rotated dimensions of q and k are multiplied by (YaRN's attention factor; else 1).
  double attentionScale() const;
  std::uint32_t dims(std::uint32_t headDim) const { return rotaryDims ? rotaryDims : headDim; }
};

/// One attention call: O = softmax(scale * Q K^T, through the modifiers) V, per batch and query head,
/// with query head h reading KV head h / (n_heads / n_kv_heads). Query i sits at position
/// kv_len - q_len + i (per-sequence lengths move it to the sequence's own end). `causal` is the
/// bottom-right causal modifier, first in the chain; `modifiers` follow in order.
struct AttentionProblem {
  std::uint32_t batch = 1;
  std::uint32_t nHeads = 1;
  std::uint32_t nKvHeads = 1;
  std::uint32_t qLen = 1;
  std::uint32_t kvLen = 1;
  std::uint32_t kvCapacity = 1;
  std::uint32_t headDim = 128;   ///< of q and k
  DType dtype = DType::F16;      ///< the KV cache's format (k and v alike); of q and o too unless set below
  std::optional<DType> queryType;   ///< q's type where it differs from the cache's
  std::optional<DType> outputType;  ///< o's type where it differs (f32 output from f16 inputs)
  Layout qLayout = Layout::HeadMajor;  ///< HeadMajor or TokenMajor; O uses oLayout
  Layout oLayout = Layout::HeadMajor;
  bool causal = true;
  float scale = 0.0f;  ///< 0 means 1/sqrt(head_dim)
  Modifiers modifiers; ///< after the causal mask, in chain order
  std::uint32_t valueDim = 0;    ///< of v and o; 0: head_dim (DeepSeek's MLA decode: 512 against 576)
  std::uint32_t valueRow = 0;    ///< elements from one V row to the next; 0: packed (value_dim)
  bool lse = false;              ///< the call also returns each query row's log-sum-exp
  /// The largest power of two, up to 8, dividing every K and V stride (rows of a token-major cache
  /// are n_kv_heads * head_dim apart): the widest loads the kernels may use.
  std::uint32_t kvAlign = 8;
  std::uint32_t qAlign = 8;      ///< the same for q's strides
  /// Paged caches (steps/PagedKv.h): rows per page, keys reached through a block table; 0: the
  /// caches hold each sequence's rows in place. kvCapacity is then max_pages * pageSize.
  std::uint32_t pageSize = 0;

  std::uint32_t group() const { return nKvHeads ? nHeads / nKvHeads : 0; }
  std::uint32_t vDim() const { return valueDim ? valueDim : headDim; }
  std::uint32_t vRow() const { return valueRow ? valueRow : vDim(); }
  DType qType() const { return queryType.value_or(dtype); }
  DType oType() const { return outputType.value_or(dtype); }
  /// V and O rows as wide as q and k (what the prefill kernels take).
  bool plainValues() const { return vDim() == headDim; }
  /// The causal modifier (when `causal`) and then `modifiers`: the chain the CPU reference runs.
  Modifiers allModifiers() const;
  /// allModifiers() without those that change nothing for this call (causal at q_len 1): what the
  /// kernels are built with.
  Modifiers activeModifiers() const;
  ModifierCall modifierCall() const;
  std::uint32_t queryOffset() const { return kvLen - qLen; }
  float softmaxScale() const;
  bool decode() const { return qLen == 1; }
  std::string describe() const;

  /// Q dims for a layout: [B, H, S, D] head-major or [B, S, H, D] token-major; O's with value_dim.
  std::vector<std::int64_t> qDims(Layout layout) const;
  std::vector<std::int64_t> oDims(Layout layout) const;
  std::vector<std::int64_t> kvDims() const;  ///< [B, Hkv, capacity, D]
  std::vector<std::int64_t> vDims() const;   ///< [B, Hkv, capacity, value_dim]
  std::vector<std::int64_t> lseDims() const; ///< [B, Hq, q_len]: one log-sum-exp per query row
};

}  // namespace foundry
