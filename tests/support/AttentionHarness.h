#pragma once
// Runs attention steps on the test device against the CPU float64 reference: fresh random inputs
// (never zeros), outputs poisoned with NaN, KV cache rows past kv_len poisoned with NaN so a kernel
// that reads them shows it.
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "foundry/steps/AttentionOptions.h"
#include "foundry/steps/AttentionProblem.h"
#include "foundry/steps/CpuReference.h"
#include "foundry/steps/FlashAttentionStep.h"

namespace foundry {
class Runtime;
}

namespace foundry::test {

/// Which input an InputPoke overwrites.
enum class Operand { Q, K, V };

/// One value written over the (rounded) random inputs, e.g. a NaN in one key row.
struct InputPoke {
  Operand operand = Operand::K;
  std::uint32_t batch = 0;
  std::uint32_t head = 0;   ///< query head for Q, KV head for K and V
  std::uint32_t token = 0;  ///< query index for Q, cache row for K and V
  std::optional<std::uint32_t> dim;  ///< nullopt: every element of the row
  float value = 0.0f;
};

/// A modifier a case runs with, as data: the harness makes the modifier (and uploads its tensors) on
/// the test runtime. Masks are drawn from the case's seed: about a quarter of the elements hidden,
/// query row 0 hidden entirely, and keys [16, 48) hidden for every row (whole tiles to skip).
struct ModifierSpec {
  enum class Kind { TopLeftCausal, Window, Alibi, SoftCap, Sinks, KeyLengths, AddMask, BitMask, Custom };
  Kind kind = Kind::Window;
  std::uint32_t left = 0, right = 0;  ///< Window
  double value = 0;                   ///< SoftCap: the cap
  std::vector<double> values;         ///< Sinks: logits per head, repeated; Alibi: slopes (empty: BLOOM's)
  std::vector<std::uint32_t> lengths; ///< KeyLengths, one per sequence
  bool broadcast = false;             ///< masks: one [1, 1, q_len, kv] mask for every sequence and head
  DType maskType = DType::F16;        ///< AddMask: f16 or f32
  std::string label;                  ///< Custom: its name in the case's name
  std::function<ModifierPtr(Runtime&, const AttentionProblem&)> make;  ///< Custom

  std::string name() const;
};
ModifierSpec topLeftCausal();
ModifierSpec window(std::uint32_t left, std::uint32_t right = 0);
ModifierSpec alibi(std::vector<double> slopes = {});
ModifierSpec softCap(double cap);
ModifierSpec sinks(std::vector<double> logits);
ModifierSpec keyLengths(std::vector<std::uint32_t> lengths);
ModifierSpec additiveMask(bool broadcast = false, DType type = DType::F16);
ModifierSpec bitMask(bool broadcast = false);
ModifierSpec custom(std::string label, std::function<ModifierPtr(Runtime&, const AttentionProblem&)> make);

struct AttentionCase {
  std::uint32_t batch = 1;
  std::uint32_t heads = 4;
  std::uint32_t kvHeads = 1;
  std::uint32_t qLen = 1;
  std::uint32_t kvLen = 64;
  std::uint32_t headDim = 64;
  std::uint32_t valueDim = 0;        ///< of v and o; 0: headDim
  bool valuesInKeys = false;         ///< v is a view of k's leading valueDim columns (MLA's latent)
  DType dtype = DType::F16;          ///< of the KV cache; of q and o too unless set below
  std::optional<DType> qType;        ///< q's own type
  std::optional<DType> oType;        ///< o's own type
  bool tokenMajorCache = false;      ///< k and v as [B, capacity, Hkv, D], read in place
  /// Paged caches: pools of pages of this many rows (token-major pages with tokenMajorCache), each
  /// sequence's pages in reverse order in the pool and a spare page of NaN; 0: not paged.
  std::uint32_t pageSize = 0;
  float valueMagnitude = 1.0f;       ///< v is uniform in [-valueMagnitude, valueMagnitude]
  Layout qLayout = Layout::HeadMajor;
  Layout oLayout = Layout::HeadMajor;
  bool causal = true;
  float magnitude = 1.0f;  ///< q and k are uniform in [-magnitude, magnitude]
  std::uint32_t seed = 1;
  float scale = 0.0f;                ///< softmax scale; 0: 1/sqrt(head_dim)
  std::vector<InputPoke> pokes;      ///< applied after the inputs are drawn, before upload
  std::vector<ModifierSpec> modifiers;  ///< after the causal mask, in order
  bool lse = false;                  ///< the call also returns each row's log-sum-exp (poisoned first)

  /// The shape (the modifiers' tensors exist only once the harness made them).
  AttentionProblem problem() const;
  /// A gtest-safe name from the shape: "b1_h8_hkv2_q7_kv45_D128_f16_qtok_otok".
  std::string name() const;
};
void PrintTo(const AttentionCase& c, std::ostream* os);

/// A case with its seed derived from the shape, so every shape draws its own inputs.
AttentionCase attentionCase(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t qLen,
                            std::uint32_t kvLen, std::uint32_t headDim, DType dtype, Layout q = Layout::HeadMajor,
                            Layout o = Layout::HeadMajor, bool causal = true);

/// Largest error against max |reference| each dtype is held to (int8 and q8_0: against the reference
/// on the dequantized cache).
double relativeBound(DType dtype);
/// Largest error against max |reference| of a quantized cache's result against the reference on the
/// values before quantization.
double quantizationBound(DType dtype);

struct AttentionResult {
  std::vector<float> got;
  std::vector<double> want;
  std::vector<float> lseGot;    ///< with AttentionCase::lse: [B, Hq, q_len]
  std::vector<double> lseWant;
  ErrorStats error;
  ErrorStats errorUnquantized;  ///< quantized caches: against the reference on the values before quantization
  StepRecord record;
  double maxAbsLogit = 0;  ///< largest |scale * q.k| over the visible (query, key) pairs
  /// With FOUNDRY_FA_PREFILL_PROBE (runFlash): the probe's words, zeroed before the call.
  std::vector<std::uint32_t> probeWords;
};

/// Runs FlashAttentionStep with `options` (knobs) on the test runtime; `rope` fuses RoPE into decode
/// (the CPU reference rotates the query itself).
AttentionResult runFlash(const AttentionCase& c, const AttentionOptions& options,
                         const std::optional<RopeSpec>& rope = std::nullopt);
/// Runs SdpaReferenceStep on the test runtime.
AttentionResult runReference(const AttentionCase& c);
/// Whether FOUNDRY_FA_DECODE_TENSOR_CORES=1 can run on this device with this KV format
/// (DecodeVariant::tensorCoresUnavailable; not lavapipe).
bool tensorCoreDecode(const DeviceInfo& device, DType kv = DType::F16);

/// Runs FlashAttentionStep once per (case, knobs) pair, all recorded into one command buffer with one
/// workspace (scratch and Split-K arrival counters shared between the calls), then submits once.
std::vector<AttentionResult> runFlashSequence(const std::vector<std::pair<AttentionCase, AttentionOptions>>& calls);

/// RoPE on the query by RopeStep (in place, at position kv_len - 1) followed by FlashAttentionStep
/// without fused RoPE, recorded into one dispatcher: the unfused path a fused RoPE->decode kernel must
/// agree with. Same inputs as runFlash for the same case.
AttentionResult runRopeThenFlash(const AttentionCase& c, const AttentionOptions& options, const RopeSpec& rope);

/// The bound one result is held to: relativeBound of the dtype, or of f16 where the decode kept its
/// partials in half (FOUNDRY_FA_DECODE_TG_OUT=half), plus what the f32 rounding of the logits costs: a
/// logit s is known to about |s| * 2^-24 and the softmax passes that on to the output, which matters
/// only for extreme logits (|s| ~ 1e4 gives 2.4e-3).
double relativeBound(const AttentionCase& c, const AttentionResult& r);

/// gtest assertion text for a result.
std::string describe(const AttentionCase& c, const AttentionResult& r);

/// The absolute error a log-sum-exp is held to: the output's relative bound times the largest
/// |logit| (at least 1), what the rounding of the scores moves it by.
double lseBound(const AttentionCase& c, const AttentionResult& r);
/// Whether `got` and `want` agree within `bound` row by row, -inf exactly where `want` is -inf;
/// "" when they do, else the first row that does not.
std::string lseMismatch(const std::vector<float>& got, const std::vector<double>& want, double bound);

/// Finite everywhere and within relativeBound(c, r) of the CPU reference; with AttentionCase::lse,
/// the log-sum-exp within lseBound(c, r) too.
::testing::AssertionResult matchesReference(const AttentionCase& c, const AttentionResult& r);

/// Error of device result `a` against device result `b` of the same case (b taken as the reference).
ErrorStats compareDeviceResults(const AttentionResult& a, const AttentionResult& b);

/// The knobs a test forces, as a gtest-safe name ("w2_k4_v1_half_sk3"); "auto" when none is set.
std::string optionsName(const AttentionOptions& options);
/// `text` with every character gtest does not take in a test name replaced by '_'.
std::string gtestSafe(std::string text);
/// A RoPE spec as a gtest-safe name ("neox_r32", "gptj", "neox_llama3_theta500000").
std::string ropeName(const RopeSpec& spec);

}  // namespace foundry::test
