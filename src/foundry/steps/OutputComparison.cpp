#include "foundry/steps/OutputComparison.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace foundry {

namespace {

bool sameNonFinite(double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return got == want;  // both infinite (one finite one not never compares equal)
}

std::string coordinates(std::size_t index, std::span<const Axis> axes, std::string_view tensor) {
  std::vector<std::string> at(axes.size());
  for (std::size_t d = axes.size(); d-- > 0;) {
    const auto size = static_cast<std::size_t>(std::max<std::int64_t>(axes[d].size, 1));
    at[d] = fmt::format("{} {}", axes[d].name, index % size);
    index /= size;
  }
  return fmt::format("{}[{}]", tensor, fmt::join(at, ", "));
}

}  // namespace

double ErrorStats::reportedRel() const { return nonFinite ? std::numeric_limits<double>::infinity() : maxRel; }

ErrorStats compareOutputs(std::span<const float> got, std::span<const double> want) {
  ErrorStats st;
  double scale = 1e-6;
  for (const double w : want) {
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  }
  const std::size_t n = std::max(got.size(), want.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double g = i < got.size() ? static_cast<double>(got[i]) : NAN;
    const double w = i < want.size() ? want[i] : NAN;
    if (i >= got.size() || i >= want.size() || ((!std::isfinite(g) || !std::isfinite(w)) && !sameNonFinite(g, w))) {
      if (st.nonFinite++ == 0) {
        st.firstNonFinite = i;
        st.firstGot = g;
        st.firstWant = w;
      }
      continue;
    }
    if (!std::isfinite(g)) {  // the same non-finite value on both sides
      if (st.sharedNonFinite++ == 0) st.firstSharedNonFinite = i;
      continue;
    }
    const double e = std::abs(g - w);
    if (e > st.maxAbs) {
      st.maxAbs = e;
      st.worstIndex = i;
    }
  }
  st.maxRel = st.maxAbs / scale;
  return st;
}

std::string describeMismatch(const ErrorStats& e, double bound, std::string_view tensor, std::span<const Axis> axes,
                             std::span<const float> got, std::span<const double> want) {
  if (e.nonFinite) {
    return fmt::format("{} non-finite mismatch{}, the first at {} (got {}, want {})", e.nonFinite,
                       e.nonFinite == 1 ? "" : "es", coordinates(e.firstNonFinite, axes, tensor), e.firstGot,
                       e.firstWant);
  }
  const double g = e.worstIndex < got.size() ? got[e.worstIndex] : NAN;
  const double w = e.worstIndex < want.size() ? want[e.worstIndex] : NAN;
  return fmt::format("relative error {:.3g} {} bound {:.3g} at {} (got {}, want {})", e.maxRel,
                     e.maxRel > bound ? ">" : "<=", bound, coordinates(e.worstIndex, axes, tensor), g, w);
}

std::string describeCheckFailure(const ErrorStats& e, double bound, std::string_view tensor, std::span<const Axis> axes,
                                 std::span<const float> got, std::span<const double> want) {
  if (!e.passes(bound)) return describeMismatch(e, bound, tensor, axes, got, want);
  if (!e.sharedNonFinite) return {};
  return fmt::format("{} output{} NaN or Inf where the reference is too, the first at {} (NaN or Inf in the "
                     "inputs reaches both alike: the check cannot vouch for them)",
                     e.sharedNonFinite, e.sharedNonFinite == 1 ? " is" : "s are",
                     coordinates(e.firstSharedNonFinite, axes, tensor));
}

}  // namespace foundry
