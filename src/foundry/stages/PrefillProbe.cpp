#include "foundry/stages/PrefillProbe.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"

namespace foundry::probe {

const std::array<const char*, kPhases + 1>& phaseNames() {
  static const std::array<const char*, kPhases + 1> names = {"setup",  "loads", "scores",  "softmax",
                                                             "values", "tile",  "barrier", "epilogue"};
  return names;
}

void declare(KernelInterface& k, const DeviceInfo& device, bool on, const char* knob) {
  k.define("FA_PROBE", on ? "1" : "0");
  if (!on) return;
  if (!device.shaderClock) {
    throw UnsupportedError(fmt::format("{} reads the shader clocks of VK_KHR_shader_clock (subgroup and device "
                                       "scope), which device '{}' does not offer",
                                       knob, device.name));
  }
  k.buffer("probe", DType::U32, Access::WriteOnly);
  k.extension("GL_ARB_shader_clock").extension("GL_EXT_shader_realtime_clock");
  k.extension("GL_KHR_shader_subgroup_basic");
  k.define("FA_PROBE_SM", device.smBuiltins ? "1" : "0");
  if (device.smBuiltins) k.extension("GL_NV_shader_sm_builtins");
}

std::uint64_t words(std::uint64_t workgroups, std::uint32_t subgroups) { return workgroups * subgroups * kWords; }

namespace {

struct Interval {
  std::uint64_t start, end;
};

// The most intervals open at once, and the time-weighted mean count over the time any is open.
std::pair<std::uint32_t, double> overlap(const std::vector<Interval>& v, double& busy) {
  std::vector<std::pair<std::uint64_t, int>> events;
  for (const auto& i : v) {
    events.push_back({i.start, +1});
    events.push_back({i.end, -1});
  }
  // Ends before starts at the same tick: a workgroup that starts as another ends did not share.
  std::sort(events.begin(), events.end());
  std::uint32_t open = 0, most = 0;
  double weighted = 0;
  busy = 0;
  for (std::size_t e = 0; e < events.size(); ++e) {
    if (e > 0 && open > 0) {
      const double dt = double(events[e].first - events[e - 1].first);
      weighted += dt * open;
      busy += dt;
    }
    open = static_cast<std::uint32_t>(int(open) + events[e].second);
    most = std::max(most, open);
  }
  return {most, busy > 0 ? weighted / busy : 0.0};
}

}  // namespace

Summary summarize(const std::vector<std::uint32_t>& w, std::uint32_t subgroups) {
  FOUNDRY_CHECK_INTERNAL(subgroups > 0 && w.size() % (std::size_t(subgroups) * kWords) == 0,
                         "probe buffer of {} words for {} subgroups per workgroup", w.size(), subgroups);
  Summary s;
  std::map<std::uint32_t, std::vector<Interval>> bySm;
  std::vector<Interval> all;
  std::array<double, kPhases + 1> phase{};
  double cycles = 0, ticks = 0;
  const std::size_t groups = w.size() / (std::size_t(subgroups) * kWords);
  for (std::size_t g = 0; g < groups; ++g) {
    Interval wg{~0ull, 0};
    std::uint32_t sm = ~0u;
    bool any = false;
    for (std::uint32_t sg = 0; sg < subgroups; ++sg) {
      const std::uint32_t* r = &w[(g * subgroups + sg) * kWords];
      const std::uint64_t start = clockAt(r, kStart), end = clockAt(r, kEnd);
      if (start == 0 && end == 0) continue;
      any = true;
      sm = r[0];
      wg.start = std::min(wg.start, start);
      wg.end = std::max(wg.end, end);
      double counted = 0;
      for (std::uint32_t p = 0; p < kPhases; ++p) {
        phase[p] += r[7 + p];
        counted += r[7 + p];
      }
      phase[kPhases] += std::max(0.0, double(r[6]) - counted);
      cycles += r[6];
      ticks += double(end - start);
    }
    if (!any) continue;
    ++s.workgroups;
    all.push_back(wg);
    if (sm != ~0u) bySm[sm].push_back(wg);
  }
  if (all.empty()) return s;
  std::uint64_t first = ~0ull, last = 0;
  double total = 0;
  for (const auto& i : all) {
    first = std::min(first, i.start);
    last = std::max(last, i.end);
    total += double(i.end - i.start);
  }
  s.spanTicks = double(last - first);
  s.workgroupTicks = total / double(all.size());
  s.sms = static_cast<std::uint32_t>(bySm.size());
  double busySum = 0, weightedSum = 0;
  for (const auto& [sm, v] : bySm) {
    double busy = 0;
    const auto [most, mean] = overlap(v, busy);
    s.maxResident = std::max(s.maxResident, most);
    busySum += busy;
    weightedSum += mean * busy;
  }
  if (busySum > 0) s.meanResident = weightedSum / busySum;
  if (s.sms > 0 && s.spanTicks > 0) s.smBusy = busySum / (double(s.sms) * s.spanTicks);
  const double phaseTotal = std::accumulate(phase.begin(), phase.end(), 0.0);
  for (std::size_t p = 0; p < phase.size(); ++p) s.phaseShare[p] = phaseTotal > 0 ? phase[p] / phaseTotal : 0;
  if (ticks > 0) s.cyclesPerTick = cycles / ticks;
  return s;
}

DecodeSummary summarizeDecode(const std::vector<std::uint32_t>& w, std::uint32_t subgroups) {
  FOUNDRY_CHECK_INTERNAL(subgroups > 0 && w.size() % (std::size_t(subgroups) * kWords) == 0,
                         "probe buffer of {} words for {} subgroups per workgroup", w.size(), subgroups);
  DecodeSummary s;
  std::uint64_t firstStart = ~0ull, lastStart = 0, lastEnd = 0, firstStreamEnd = ~0ull, lastStreamEnd = 0;
  double setup = 0, stream = 0, handOver = 0, merge = 0;
  const std::size_t groups = w.size() / (std::size_t(subgroups) * kWords);
  for (std::size_t g = 0; g < groups; ++g) {
    // The workgroup: its first subgroup's start, its last one's stream end, hand-over and end.
    std::uint64_t start = ~0ull, begun = ~0ull, done = 0, handed = 0, end = 0;
    bool any = false, merged = false;
    for (std::uint32_t sg = 0; sg < subgroups; ++sg) {
      const std::uint32_t* r = &w[(g * subgroups + sg) * kWords];
      if (clockAt(r, kStart) == 0 && clockAt(r, kEnd) == 0) continue;
      any = true;
      start = std::min(start, clockAt(r, kStart));
      begun = std::min(begun, clockAt(r, kStreamBegun));
      done = std::max(done, clockAt(r, kStreamDone));
      handed = std::max(handed, clockAt(r, kHandedOver));
      end = std::max(end, clockAt(r, kEnd));
      merged = merged || r[kMerged] != 0;
    }
    if (!any) continue;
    ++s.workgroups;
    firstStart = std::min(firstStart, start);
    lastStart = std::max(lastStart, start);
    lastEnd = std::max(lastEnd, end);
    firstStreamEnd = std::min(firstStreamEnd, done);
    lastStreamEnd = std::max(lastStreamEnd, done);
    setup += double(begun - start);
    stream += double(done - begun);
    handOver += double(handed - done);
    if (merged) {
      ++s.merged;
      merge += double(end - handed);
    }
  }
  if (s.workgroups == 0) return s;
  const double n = s.workgroups;
  s.spanTicks = double(lastEnd - firstStart);
  s.startSpread = double(lastStart - firstStart);
  s.setup = setup / n;
  s.stream = stream / n;
  s.streamEndSpread = double(lastStreamEnd - firstStreamEnd);
  s.handOver = handOver / n;
  s.merge = s.merged ? merge / s.merged : 0;
  s.tail = double(lastEnd - lastStreamEnd);
  return s;
}

std::string DecodeSummary::describe() const {
  return fmt::format("{} workgroups ({} merged), span {:.0f} ticks: starts spread over {:.0f}; a workgroup's setup "
                     "{:.0f}, stream {:.0f} (ends spread over {:.0f}), hand-over {:.0f}; the merge {:.0f}; the last "
                     "stream's end to the last end {:.0f}",
                     workgroups, merged, spanTicks, startSpread, setup, stream, streamEndSpread, handOver, merge, tail);
}

std::string Summary::describe() const {
  std::string phases;
  for (std::size_t p = 0; p < phaseShare.size(); ++p) {
    phases += fmt::format("{}{} {:.1f}%", p ? ", " : "", phaseNames()[p], 100.0 * phaseShare[p]);
  }
  const std::string where =
      sms ? fmt::format("on {} SMs; workgroups at once per SM: at most {}, {:.2f} on average while busy; SMs busy "
                        "{:.1f}% of the span",
                        sms, maxResident, meanResident, 100.0 * smBusy)
          : std::string("(no SM ids on this device)");
  return fmt::format("{} workgroups {}; span {:.0f} ticks, a workgroup {:.0f} ticks, {:.2f} cycles a tick; subgroup "
                     "cycles: {}",
                     workgroups, where, spanTicks, workgroupTicks, cyclesPerTick, phases);
}

}  // namespace foundry::probe
