#pragma once
// The log-sum-exp output an attention call may ask for: f32 [batch, n_heads, q_len], each query row's
// natural log of its softmax denominator (the exp-sum of its scaled, modified scores, a sink
// included), -inf for a row whose denominator is 0. Every kernel that writes an attention output
// (decode, the Split-K merges, prefill) and the merge kernel declare and store it the same way.
#include <string>

#include "foundry/KernelInterface.h"

namespace foundry::lse_detail {

/// The write-only f32 buffer "lse" (the push constants n_heads and q_len index it).
void declare(KernelInterface& k);
/// The GLSL index of row (batch, head, token) in an LSE tensor.
std::string row(const std::string& batch, const std::string& head, const std::string& token);
/// The GLSL statement that stores `value` as the LSE of row (batch, head, token).
std::string store(const std::string& batch, const std::string& head, const std::string& token,
                  const std::string& value);
/// The statement storing the LSE of an attention row from its log2-domain maximum `m` and sum `l`
/// (fa_lse: through the sink hook, in a kernel that hosts the output's hooks).
std::string storeRow(const std::string& batch, const std::string& head, const std::string& token, const std::string& m,
                     const std::string& l);

}  // namespace foundry::lse_detail
