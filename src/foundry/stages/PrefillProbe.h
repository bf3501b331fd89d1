#pragma once
// The prefill probe: a measuring build of the prefill kernels (FOUNDRY_FA_PREFILL_PROBE) in which
// every subgroup records which SM ran it, when it started and ended on the device's clock, and how
// many of its SM's cycles each phase of the tile loop took (kernels/flashattention/probe.glsl holds
// the record's layout). Summaries answer what timings alone cannot: how many workgroups share an SM
// at once, how long SMs sit idle in the grid's tail, and where a subgroup's cycles go.
// The decode probe (FOUNDRY_FA_DECODE_PROBE) writes records of the same size with the device-clock
// times of a decode workgroup's milestones instead of phase cycles: where a call's fixed cost goes
// (q staged, the partials handed over, the last workgroup's merge) and how unevenly the splits end.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "foundry/KernelInterface.h"

namespace foundry {

struct DeviceInfo;

namespace probe {

constexpr const char* kTensor = "probe_records";  ///< the workspace tensor FlashAttentionStep binds
constexpr std::uint32_t kWords = 16;  ///< per subgroup (PROBE_WORDS)
constexpr std::uint32_t kPhases = 7;  ///< PROBE_SETUP .. PROBE_BARRIER
/// A record's words (probe.glsl): the start and end on the device clock (low, high), and in decode
/// records the milestones (the same) and the merged flag.
constexpr std::uint32_t kStart = 2, kEnd = 4;
constexpr std::uint32_t kStreamBegun = 7, kStreamDone = 9, kHandedOver = 11, kMerged = 13;
/// The 64-bit device-clock time at word `word` of a record.
inline std::uint64_t clockAt(const std::uint32_t* record, std::uint32_t word) {
  return (std::uint64_t(record[word + 1]) << 32) | record[word];
}
/// The phases in the record's order, and "epilogue" (the cycles after the loop) after them.
const std::array<const char*, kPhases + 1>& phaseNames();

/// Declares FA_PROBE (0 or 1), and with 1 the write-only u32 buffer "probe" and the clock extensions.
/// With `on`, UnsupportedError naming `knob` where the device lacks VK_KHR_shader_clock's clocks.
void declare(KernelInterface& k, const DeviceInfo& device, bool on, const char* knob = "FOUNDRY_FA_PREFILL_PROBE");

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

/// A decode call's milestones, in device-clock ticks (nanoseconds on NVIDIA), from the decode probe's
/// records: means over workgroups unless said.
struct DecodeSummary {
  std::uint32_t workgroups = 0;  ///< recorded
  std::uint32_t merged = 0;      ///< workgroups that merged their head group's splits
  double spanTicks = 0;          ///< the first start to the last end
  double startSpread = 0;        ///< the first workgroup's start to the last one's
  double setup = 0;              ///< start to the keys' stream begun (q staged)
  double stream = 0;             ///< the stream begun to the workgroup's last subgroup done with it
  double streamEndSpread = 0;    ///< the first workgroup's stream end to the last one's
  double handOver = 0;           ///< stream done to handed over (partials written, arrival counted)
  double merge = 0;              ///< handed over to the end, in the workgroups that merged
  double tail = 0;               ///< the last stream end to the last end: what follows the stream
  std::string describe() const;
};

/// Reads a decode probe buffer of `subgroups` subgroups per workgroup (records as summarize()).
DecodeSummary summarizeDecode(const std::vector<std::uint32_t>& words, std::uint32_t subgroups);

}  // namespace probe
}  // namespace foundry
