#pragma once
// The prefill probe: a measuring build of the prefill kernels (FOUNDRY_FA_PREFILL_PROBE) in which
// every subgroup records which SM ran it, when it started and ended on the device's clock, and how
// many of its SM's cycles each phase of the tile loop took (kernels/flashattention/probe.glsl holds
// the record's layout). Summaries answer what timings alone cannot: how many workgroups share an SM
// at once, how long SMs sit idle in the grid's tail, and where a subgroup's cycles go.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "foundry/KernelInterface.h"

namespace foundry {

struct DeviceInfo;

namespace probe {

constexpr const char* kTensor = "prefill_probe";  ///< the workspace tensor FlashAttentionStep binds
constexpr std::uint32_t kWords = 16;  ///< per subgroup (PROBE_WORDS)
constexpr std::uint32_t kPhases = 7;  ///< PROBE_SETUP .. PROBE_BARRIER
/// The phases in the record's order, and "epilogue" (the cycles after the loop) after them.
const std::array<const char*, kPhases + 1>& phaseNames();

/// Declares FA_PROBE (0 or 1), and with 1 the write-only u32 buffer "probe" and the clock extensions.
/// With `on`, UnsupportedError where the device lacks VK_KHR_shader_clock's clocks.
void declare(KernelInterface& k, const DeviceInfo& device, bool on);

/// Words of the probe buffer for a grid of `workgroups` of `subgroups` subgroups.
std::uint64_t words(std::uint64_t workgroups, std::uint32_t subgroups);

struct Summary {
  std::uint32_t workgroups = 0;  ///< recorded (a workgroup that wrote nothing is left out)
  std::uint32_t sms = 0;         ///< distinct SMs seen; 0 without SM ids
  std::uint32_t maxResident = 0;  ///< the most workgroups one SM ran at the same time
  double meanResident = 0;       ///< workgroups per SM at once, averaged over the time the SM was busy
  double smBusy = 0;             ///< of SMs x the dispatch's span, the part an SM held a workgroup
  double spanTicks = 0;          ///< first start to last end, device clock ticks
  double workgroupTicks = 0;     ///< mean workgroup duration, ticks
  /// Of all subgroups' cycles, each phase's share (phaseNames order; the last is the epilogue).
  std::array<double, kPhases + 1> phaseShare{};
  double cyclesPerTick = 0;      ///< SM cycles per device-clock tick (the clock rate against the timer)
  std::string describe() const;
};

/// Reads a probe buffer of `subgroups` subgroups per workgroup. Records whose start and end are both
/// zero (the buffer zeroed beforehand, the workgroup returned early) are skipped.
Summary summarize(const std::vector<std::uint32_t>& words, std::uint32_t subgroups);

}  // namespace probe
}  // namespace foundry
