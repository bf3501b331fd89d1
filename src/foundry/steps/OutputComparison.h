#pragma once
// The one comparison of outputs with a reference: `foundry run --check` and `--expect`, `foundry bench`'s
// spot check, FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE and the attention test suites all use it.
//
// A non-finite value on either side is a mismatch unless the other side holds the same value: NaN
// against NaN, +Inf against +Inf, -Inf against -Inf. A NaN in the reference (NaN inputs, a golden file
// of NaN) therefore fails against any number, and an Inf in the reference does not widen the scale
// that relative errors are measured against.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace foundry {

/// Error of `got` against `want`.
struct ErrorStats {
  double maxAbs = 0;           ///< largest |got - want| where both are finite
  double maxRel = 0;           ///< maxAbs / max(largest finite |want|, 1e-6)
  std::size_t worstIndex = 0;  ///< where maxAbs is
  /// Elements where a NaN or Inf on one side is not the same value on the other, plus the elements
  /// one side has and the other lacks when their lengths differ.
  std::size_t nonFinite = 0;
  std::size_t firstNonFinite = 0;  ///< the first of them
  double firstGot = 0, firstWant = 0;  ///< their values there (NaN past the end of a side)
  /// Elements that are the same NaN or Inf on both sides: a match, which says nothing of the numbers
  /// (NaN or Inf in the inputs reach both sides alike), so that `--check` refuses to call it a pass.
  std::size_t sharedNonFinite = 0;
  std::size_t firstSharedNonFinite = 0;

  /// No non-finite mismatch and maxRel within `bound`.
  bool passes(double bound) const { return nonFinite == 0 && maxRel <= bound; }
  /// The relative error, or +Inf where a non-finite value does not match: what a report shows.
  double reportedRel() const;
};

ErrorStats compareOutputs(std::span<const float> got, std::span<const double> want);

/// One axis of a compared tensor, to name an element's coordinates: {"head", 32}.
struct Axis {
  std::string_view name;
  std::int64_t size = 0;
};

/// The failure in one clause, for reports and error lines: "6144 non-finite mismatches, the first at
/// o[layer 0, batch 0, token 0, head 0, d 0] (got -0.0123, want nan)" or "relative error 0.25 > bound
/// 0.003 at o[...] (got 0.5, want 0.25)". `axes` (row-major) turn flat indices into coordinates of `tensor`.
std::string describeMismatch(const ErrorStats& e, double bound, std::string_view tensor, std::span<const Axis> axes,
                             std::span<const float> got, std::span<const double> want);
/// Why a check of kernels against a reference on the same inputs fails, or empty where it passes: a
/// mismatch (describeMismatch), else outputs that are NaN or Inf where the reference is too ("64 outputs
/// are NaN or Inf where the reference is too, the first at o[...]"), which vouch for nothing.
std::string describeCheckFailure(const ErrorStats& e, double bound, std::string_view tensor, std::span<const Axis> axes,
                                 std::span<const float> got, std::span<const double> want);

}  // namespace foundry
