#pragma once
// The hook points of every attention kernel: where modifier stages (causal, windows, ALiBi, soft-cap,
// sinks, per-sequence lengths, masks, a user's own) plug into the inner loop. One definition of each
// point; kernels host the points of the phases they run. Modifier authors work in natural units:
// logits are scale * q.k, positions are key indices; the kernels' log2-domain scaling stays inside
// kernels/flashattention/hooks.glsl.
//
//   fa_kv_len(b)                       keys of sequence b (single)            fallback pc.kv_len
//   fa_distance_bias(b, h)             slope of a bias slope * (k - q) added  fallback 0.0
//                                      to each logit before fa_score (sum)
//   fa_score(s, b, h, q, k)            logit -> logit (chain, in order)       fallback s
//   fa_visible(b, h, q, k)             mask predicate (all must hold)         fallback true
//   fa_key_range(b, h, q_lo, q_hi)     uvec4(any_lo, any_hi, all_lo, all_hi): keys outside [any_lo,
//                                      any_hi) are invisible to every query position in [q_lo, q_hi],
//                                      keys inside [all_lo, all_hi) visible to all of them (met). For
//                                      q_lo == q_hi the kernels hide every key outside any_lo..any_hi:
//                                      a mask that is an interval per query needs no fa_visible
//   fa_tile_visible(b, h, q_lo, q_hi, k_lo, k_hi)
//                                      false when no key of [k_lo, k_hi) is visible to any query of
//                                      the block (all; a hint: decode ignores it)
//   fa_sink(b, h)                      a logit added to the softmax denominator only (single)
//   fa_epilogue(o, b, h, q, d)         each normalised output element before the store (chain)
// q is a query's position among the keys: query i of sequence b sits at fa_kv_len(b) - q_len + i.
// Kernels may call fa_score for keys the masks hide and for keys past fa_kv_len(b) up to the end of a
// tile (and discard the result: a branch per score costs more), so a score hook that reads memory by
// key holds the key within the sequence.
#include <memory>
#include <set>
#include <string>

#include "foundry/KernelInterface.h"
#include "foundry/Stage.h"

namespace foundry {

namespace hook {
inline constexpr const char* kKvLen = "fa_kv_len";
inline constexpr const char* kDistanceBias = "fa_distance_bias";
inline constexpr const char* kScore = "fa_score";
inline constexpr const char* kVisible = "fa_visible";
inline constexpr const char* kKeyRange = "fa_key_range";
inline constexpr const char* kTileVisible = "fa_tile_visible";
inline constexpr const char* kSink = "fa_sink";
inline constexpr const char* kEpilogue = "fa_epilogue";
}  // namespace hook

/// The points of the key loop (kv_len, distance_bias, score, visible, key_range, tile_visible), of the output
/// (kv_len, sink, epilogue), or both.
enum class HookPhase { Keys, Output, All };

/// The hook points of `phase`, by name.
std::set<std::string> attentionHookNames(HookPhase phase);
/// Hosts exactly `points` (a kernel hosts only what it calls) with the helpers of
/// kernels/flashattention/hooks*.glsl: fa_keys and fa_score_log2 for the key loop, fa_norm_scale and
/// fa_output for the output. The stage must declare or use the push constants q_len and kv_len.
void hostAttentionHooks(KernelInterface& k, const std::set<std::string>& points);
inline void hostAttentionHooks(KernelInterface& k, HookPhase phase) { hostAttentionHooks(k, attentionHookNames(phase)); }

/// `stage` with only its hooks on `points` (its resources and snippets unchanged): how a step hands
/// the key-loop hooks to a Split-K part kernel and the output hooks to its reduce kernel. Null if the
/// stage hooks none of them.
StagePtr onlyHooks(const StagePtr& stage, const std::set<std::string>& points, const DeviceInfo& device);

}  // namespace foundry
