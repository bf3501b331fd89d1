#pragma once
// Runs attention steps on the test device against the CPU float64 reference: fresh random inputs
// (never zeros), outputs poisoned with NaN, KV cache rows past kv_len poisoned with NaN so a kernel
// that reads them shows it.
#include <optional>
#include <string>
#include <vector>

#include "foundry/RuntimeOptions.h"
#include "steps/AttentionProblem.h"
#include "steps/CpuReference.h"
#include "steps/FlashAttentionStep.h"

namespace foundry::test {

struct AttentionCase {
  std::uint32_t batch = 1;
  std::uint32_t heads = 4;
  std::uint32_t kvHeads = 1;
  std::uint32_t qLen = 1;
  std::uint32_t kvLen = 64;
  std::uint32_t headDim = 64;
  DType dtype = DType::F16;
  Layout qLayout = Layout::HeadMajor;
  Layout oLayout = Layout::HeadMajor;
  bool causal = true;
  float magnitude = 1.0f;  ///< q and k are uniform in [-magnitude, magnitude]
  std::uint32_t seed = 1;

  AttentionProblem problem() const;
  std::string name() const;
};

/// Largest error against max |reference| each dtype is held to.
double relativeBound(DType dtype);

struct AttentionResult {
  std::vector<float> got;
  std::vector<double> want;
  ErrorStats error;
  StepRecord record;
};

/// Runs FlashAttentionStep with `options` (knobs) on the test runtime; `rope` fuses RoPE into decode
/// (the CPU reference rotates the query itself).
AttentionResult runFlash(const AttentionCase& c, const RuntimeOptions& options,
                         const std::optional<RopeSpec>& rope = std::nullopt);
/// Runs SdpaReferenceStep on the test runtime.
AttentionResult runReference(const AttentionCase& c);

/// gtest assertion text for a result.
std::string describe(const AttentionCase& c, const AttentionResult& r);

}  // namespace foundry::test
