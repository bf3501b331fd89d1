#pragma once
// The tensors and scalars of one attention call, and their checks. Shared by FlashAttentionStep and
// SdpaReferenceStep so both accept exactly the same inputs.
#include <optional>

#include "foundry/Dispatcher.h"
#include "foundry/Tensor.h"
#include "foundry/steps/AttentionProblem.h"

namespace foundry {

/// RoPE fused into decode: the query is rotated at `position` on its way into shared memory.
struct FusedRope {
  RopeSpec spec;
  Tensor invFreq;  ///< f32 turns per position (makeRopeTable)
  std::uint32_t position = 0;
};

struct AttentionCall {
  Tensor q;  ///< [B, Hq, q_len, D] head-major or [B, q_len, Hq, D] token-major
  Tensor k;  ///< [B, Hkv, capacity, D] KV cache
  Tensor v;  ///< [B, Hkv, capacity, D] KV cache
  Tensor o;  ///< like q, in its own layout
  std::uint32_t kvLen = 0;  ///< valid rows of the caches, the new tokens included
  bool causal = true;       ///< the bottom-right causal mask, first of the modifiers
  float scale = 0.0f;       ///< 0: 1/sqrt(D)
  std::optional<FusedRope> rope;
  Modifiers modifiers;      ///< windows, ALiBi, soft-caps, sinks, lengths, masks, a user's own; in order
  /// When set, f32 [B, Hq, q_len] packed: each query row's log-sum-exp (natural log) of its scaled,
  /// modified scores (a sink included), -inf for a row whose softmax denominator is 0. What MergeStep
  /// weighs partial results by.
  std::optional<Tensor> lse;
};

/// Checks what every attention kernel needs of a 4-d tensor: dimensions below 2^32, contiguous in the
/// last dimension (`lastDim` names it in the message), strides that fit in 32 bits. UserError naming
/// `role`, or UnsupportedError for a stride beyond 32 bits.
void requireRank4(const Tensor& t, const std::string& role, const char* lastDim = "head_dim");

/// Checks the tensors against each other, and each modifier against the call, and returns the problem
/// they describe. Every failure is a UserError naming the tensor, the field and the values (head_dim
/// support is checked by the step).
AttentionProblem describeCall(const AttentionCall& call);

/// Sets the shape and stride push constants every attention kernel declares.
void setShapeArguments(Arguments& args, const AttentionProblem& p, const AttentionCall& call);

}  // namespace foundry
