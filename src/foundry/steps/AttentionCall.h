#pragma once
// The tensors and scalars of one attention call, and their checks. Shared by FlashAttentionStep and
// SdpaReferenceStep so both accept exactly the same inputs.
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "foundry/Dispatcher.h"
#include "foundry/Tensor.h"
#include "foundry/steps/AttentionProblem.h"
#include "foundry/steps/PagedKv.h"

namespace foundry {

/// RoPE fused into decode: the query is rotated at `position` on its way into shared memory.
struct FusedRope {
  RopeSpec spec;
  Tensor invFreq;  ///< f32 turns per position (makeRopeTable)
  std::uint32_t position = 0;
};

/// A KV cache tensor as the kernels see it: kv-cache [B, Hkv, capacity, D] (rows `rowStride` apart:
/// packed, or a view of wider rows) or token-major [B, capacity, Hkv, D], read in place.
struct CacheView {
  std::uint32_t batch = 0, heads = 0, capacity = 0, dim = 0;
  std::uint32_t batchStride = 0, headStride = 0, rowStride = 0;
  std::uint32_t scaleBatchStride = 0, scaleHeadStride = 0, scaleBlockStride = 0;  ///< int8: of Tensor::scales
};
/// UserError naming `role` for another layout or rank, or a quantized cache whose geometry its
/// blocks cannot follow (q8_0: rows of whole blocks; int8: strides of whole words, a scales tensor
/// of scalesShape's dims); requireRank4's checks first.
CacheView cacheView(const Tensor& t, const std::string& role);
/// The largest power of two, up to `most`, dividing every one of `strides`.
std::uint32_t strideAlignment(std::initializer_list<std::uint32_t> strides, std::uint32_t most = 8);

/// q, k, v and o may each have their own type (f16, bf16, f32), but k and v are one cache: one format.
struct AttentionCall {
  Tensor q;  ///< [B, Hq, q_len, D] head-major or [B, q_len, Hq, D] token-major
  Tensor k;  ///< [B, Hkv, capacity, D] kv-cache, or [B, capacity, Hkv, D] token-major
  Tensor v;  ///< like k, with value_dim for D
  Tensor o;  ///< like q, in its own layout, with value_dim for D
  std::uint32_t kvLen = 0;  ///< valid rows of the caches, the new tokens included
  bool causal = true;       ///< the bottom-right causal mask, first of the modifiers
  float scale = 0.0f;       ///< 0: 1/sqrt(D)
  std::optional<FusedRope> rope;
  Modifiers modifiers;      ///< windows, ALiBi, soft-caps, sinks, lengths, masks, a user's own; in order
  /// When set, f32 [B, Hq, q_len] packed: each query row's log-sum-exp (natural log) of its scaled,
  /// modified scores (a sink included), -inf for a row whose softmax denominator is 0. What MergeStep
  /// weighs partial results by.
  std::optional<Tensor> lse;
  /// When set, k and v are pools of pages and sequence b's keys are found through the block table
  /// (steps/PagedKv.h); kvLen and per-sequence lengths count keys as without pages.
  std::optional<PagedKv> pages;
};

/// Checks what every attention kernel needs of a 4-d tensor: dimensions below 2^32, contiguous in the
/// last dimension (`lastDim` names it in the message), strides that fit in 32 bits. UserError naming
/// `role`, or UnsupportedError for a stride beyond 32 bits.
void requireRank4(const Tensor& t, const std::string& role, const char* lastDim = "head_dim");

/// Checks that `out`, which a step writes, names each element once (foundry/Tensor.h selfOverlapping) and
/// shares none with `inputs` (viewsOverlap), whatever kernels the plan takes: a UserError naming `role`.
void requireOwnElements(const Tensor& out, const std::string& role,
                        const std::vector<std::pair<const Tensor*, std::string>>& inputs);

/// Checks the tensors against each other, and each modifier against the call, and returns the problem
/// they describe. Every failure is a UserError naming the tensor, the field and the values (head_dim
/// support is checked by the step).
AttentionProblem describeCall(const AttentionCall& call);

/// A decode call (q_len 1) seen as a prefill of its GQA groups (Selector::groupRowsProblem): q, o and
/// the LSE as head-major [B, n_kv_heads, group, D] views of the same memory, with no causal mask (one
/// query position sees every key).
AttentionCall groupRowsCall(const AttentionCall& call, std::uint32_t group);

/// The values of a latent cache (absorbed MLA): a view of the last `valueDim` columns of each row of
/// `keys`, with its strides, read in place (docs/attention.md, "Value rows narrower than key rows").
Tensor latentValueView(const Tensor& keys, std::uint32_t valueDim);

/// Shape-only (no buffers): the call's caches as pools of `poolPages` pages of `pageSize` rows
/// (kv-cache [pages, Hkv, page_size, D], an int8 or q8_0 cache's scales with them) reached through a
/// u32 block table [batch, max_pages] named "block_table" holding `table` (row-major). Empty `table`:
/// sequence b's page i is poolPages - 1 - (b * maxPages + i), pages in reverse order, with maxPages
/// covering kv_len; poolPages 0: batch x maxPages. For planning and listing kernels.
AttentionCall describePagedCaches(AttentionCall c, std::uint32_t pageSize, std::uint32_t poolPages = 0,
                                  std::vector<std::uint32_t> table = {}, std::uint32_t maxPages = 0);

/// Sets the cache stride push constants every attention kernel declares.
void setCacheStrides(Arguments& args, const Tensor& k, const Tensor& v);
/// Binds the caches (and an int8 cache's scales, and a paged cache's block table) for a kernel with a
/// KvAccessStage, and sets their strides (the scales' and the table's too).
void bindCaches(Arguments& args, const Tensor& k, const Tensor& v, const PagedKv* pages = nullptr);
/// The key cache alone, for a kernel whose KvAccessStage has keysOnly (appends to latent rows).
void bindKeyCache(Arguments& args, const Tensor& k, const PagedKv* pages = nullptr);
/// bindCaches with the call's caches and pages.
void bindCaches(Arguments& args, const AttentionCall& call);
/// Sets the shape and stride push constants every attention kernel declares.
void setShapeArguments(Arguments& args, const AttentionProblem& p, const AttentionCall& call);

}  // namespace foundry
