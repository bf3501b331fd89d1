#pragma once
// Attention and RoPE on the host in float64: the reference every kernel is checked against, and what
// `foundry run --check` compares with.
#include <span>
#include <vector>

#include "foundry/steps/AttentionProblem.h"
#include "foundry/steps/OutputComparison.h"

namespace foundry {

/// Packed host tensors in the layouts the problem names: q in qLayout, k as [B, Hkv, capacity, D],
/// v as [B, Hkv, capacity, value_dim] (packed here, whatever its rows' stride on the device).
/// Returns O in oLayout, value_dim wide. Only the first kv_len rows of each cache are read (a sequence's own length
/// with per-sequence lengths). The problem's modifiers run through their own float64 hooks: masks,
/// score changes, sinks in the denominator, epilogues; a row that sees nothing gives 0. With `lse`,
/// also each row's log-sum-exp, [B, Hq, q_len]: the natural log of its softmax denominator (a sink
/// included), -inf where that is 0.
std::vector<double> cpuAttention(const AttentionProblem& p, std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v, std::vector<double>* lse = nullptr);

/// One output row (batch b, query head h, token i) of cpuAttention, for spot checks of large shapes.
std::vector<double> cpuAttentionRow(const AttentionProblem& p, std::span<const float> q, std::span<const float> k,
                                    std::span<const float> v, std::uint32_t b, std::uint32_t h, std::uint32_t i);

/// The largest |logit| (scaled, through the score modifiers) over the visible (query, key) pairs.
double maxAbsLogit(const AttentionProblem& p, std::span<const float> q, std::span<const float> k);

/// Rotates `x` in place: `x` is a sequence of head vectors of `headDim` elements; vector i sits at
/// position `positionOfVector[i]`. Dimensions past the rotary dims pass through.
void cpuRope(const RopeSpec& spec, std::uint32_t headDim, std::span<float> x,
             const std::vector<std::uint32_t>& positionOfVector);

/// Element offset of (b, h, s, 0) in a packed Q (head_dim) or O (value_dim) tensor of `layout`.
std::size_t qIndex(const AttentionProblem& p, Layout layout, std::uint32_t b, std::uint32_t h, std::uint32_t s);
std::size_t oIndex(const AttentionProblem& p, Layout layout, std::uint32_t b, std::uint32_t h, std::uint32_t s);
/// Element offset of (b, kv_h, s, 0) in a packed K (head_dim) or V (value_dim) cache.
std::size_t kvIndex(const AttentionProblem& p, std::uint32_t b, std::uint32_t kvh, std::uint32_t s);
std::size_t vIndex(const AttentionProblem& p, std::uint32_t b, std::uint32_t kvh, std::uint32_t s);


}  // namespace foundry
