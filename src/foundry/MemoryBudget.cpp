#include "foundry/MemoryBudget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

namespace {

/// A "Name:   1234 kB" line of /proc/meminfo or /proc/self/status, in bytes; nothing if absent.
std::optional<std::uint64_t> procKiB(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key + ":")) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

std::string listParts(const std::vector<MemoryPlan::Part>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.bytes == 0) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", p.name, humanBytes(p.bytes));
  }
  return out;
}

std::uint64_t sum(const std::vector<MemoryPlan::Part>& parts) {
  std::uint64_t total = 0;
  for (const auto& p : parts) total = p.bytes > std::numeric_limits<std::uint64_t>::max() - total
                                          ? std::numeric_limits<std::uint64_t>::max() : total + p.bytes;
  return total;
}

}  // namespace

std::string humanBytes(std::uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1ull << 20));
  return fmt::format("{} B", bytes);
}

void checkAllocationFits(const DeviceInfo& device, std::uint64_t bytes, const std::string& name) {
  if (bytes > device.maxAllocationBytes) {
    throw DeviceError(fmt::format("allocating {} bytes ({}) for '{}' exceeds the device's largest allocation of {} ({})",
                                  bytes, humanBytes(bytes), name, device.maxAllocationBytes,
                                  humanBytes(device.maxAllocationBytes)));
  }
  if (bytes > device.deviceMemoryBytes) {
    throw DeviceError(fmt::format("allocating {} bytes ({}) for '{}' exceeds the device's memory of {}", bytes,
                                  humanBytes(bytes), name, humanBytes(device.deviceMemoryBytes)));
  }
}

HostMemory hostMemory() {
  HostMemory h;
  if (const auto meminfo = procKiB("/proc/meminfo", "MemAvailable")) {
    h = {*meminfo, fmt::format("MemAvailable {}", humanBytes(*meminfo))};
  } else {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t free = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : 0;
    h = {free, fmt::format("free memory {}", humanBytes(free))};
  }
  // A limit counts what the process already holds: the room is the limit less that.
  const struct {
    int resource;
    const char* name;
    const char* usage;
  } limits[] = {{RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize"}, {RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData"}};
  for (const auto& l : limits) {
    rlimit r{};
    if (::getrlimit(l.resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) continue;
    const std::uint64_t used = procKiB("/proc/self/status", l.usage).value_or(0);
    const std::uint64_t room = r.rlim_cur > used ? r.rlim_cur - used : 0;
    if (room < h.availableBytes) {
      h = {room, fmt::format("{} {} with {} in use", l.name, humanBytes(r.rlim_cur), humanBytes(used))};
    }
  }
  return h;
}

std::uint64_t MemoryPlan::deviceBytes() const { return sum(device); }
std::uint64_t MemoryPlan::hostBytes() const { return sum(host); }

void checkMemoryPlan(const MemoryPlan& plan, const DeviceInfo& device, const HostMemory& host) {
  for (const auto& p : plan.device) {
    if (p.buffer) checkAllocationFits(device, p.bytes, p.name);
  }
  const std::uint64_t onDevice = plan.deviceBytes();
  if (onDevice > device.deviceMemoryBytes) {
    throw DeviceError(fmt::format("this run needs {} bytes ({}) of device memory ({}) but the largest heap of '{}' "
                                  "holds {} bytes ({}); {}", onDevice, humanBytes(onDevice), listParts(plan.device),
                                  device.name, device.deviceMemoryBytes, humanBytes(device.deviceMemoryBytes),
                                  plan.remedy));
  }
  // A CPU driver's heap is host memory: its buffers come out of the same room.
  std::vector<MemoryPlan::Part> onHost = plan.host;
  if (device.kind == DeviceKind::Cpu) onHost.push_back({"device buffers (host memory on a CPU device)", onDevice});
  const std::uint64_t hostBytes = sum(onHost);
  if (hostBytes > host.availableBytes) {
    throw DeviceError(fmt::format("this run needs {} bytes ({}) of host memory ({}) but {} bytes ({}) are available "
                                  "({}); {}", hostBytes, humanBytes(hostBytes), listParts(onHost), host.availableBytes,
                                  humanBytes(host.availableBytes), host.limitedBy, plan.remedy));
  }
}

}  // namespace foundry
