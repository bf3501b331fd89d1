// The device string: DeviceInfo::toString and parseDevicePreset, both driven by one table of keys so
// that every key written is a key read.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"

namespace foundry {

namespace {

constexpr const char* kField = "device preset";

[[noreturn]] void reject(std::string_view key, std::string_view value, std::string_view accepted) {
  throw UserError(kField, fmt::format("{}='{}' is not accepted; accepted: {}", key, printable(value), accepted));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::uint64_t parseNumber(std::string_view key, std::string_view value, std::uint64_t max) {
  std::uint64_t out = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || ptr != value.data() + value.size() || out > max) {
    reject(key, value, fmt::format("an integer 0..{}", max));
  }
  return out;
}

bool parseFlag(std::string_view key, std::string_view value) {
  if (value != "0" && value != "1") reject(key, value, "0, 1");
  return value == "1";
}

/// Calls `f` on each part of `text` between the `sep`s; empty text has no parts.
template <typename F>
void forEachPart(std::string_view text, char sep, F f) {
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(sep), text.size());
    f(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

/// Numbers joined by `sep`, each at most `max`; empty text is an empty list.
template <typename T>
std::vector<T> parseList(std::string_view key, std::string_view text, char sep, std::uint64_t max) {
  std::vector<T> out;
  forEachPart(text, sep, [&](std::string_view part) { out.push_back(static_cast<T>(parseNumber(key, part, max))); });
  return out;
}

// ---- values with a syntax of their own --------------------------------------------------------------

constexpr const char* kShapesAccepted =
    "0 or none (no cooperative matrix), 1 (NVIDIA's shapes), or MxNxK:input:accumulator joined by + "
    "(e.g. 16x16x16:f16:f32+16x8x16:f16:f16)";

CoopMatShape parseShape(std::string_view key, std::string_view text) {
  const std::size_t c1 = text.find(':'), c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) reject(key, text, kShapesAccepted);
  const auto dims = parseList<std::uint32_t>(key, text.substr(0, c1), 'x', std::numeric_limits<std::uint32_t>::max());
  // Accumulators may be i32 (int8 products), which no tensor is.
  const auto parse = [](std::string_view t) { return t == "i32" ? std::optional(DType::I32) : parseDType(t); };
  const auto input = parse(text.substr(c1 + 1, c2 - c1 - 1)), acc = parse(text.substr(c2 + 1));
  if (dims.size() != 3 || !input || !acc) reject(key, text, kShapesAccepted);
  return {dims[0], dims[1], dims[2], *input, *acc};
}

void setCoopMat(DeviceInfo& d, std::string_view key, std::string_view value) {
  if (value == "0" || value == "none") {
    d.coopMatShapes.clear();
    d.coopMatLayout = d.coopMatLayout8 = d.coopMatLayoutF16 = {};
  } else if (value == "1") {
    if (d.coopMatShapes.empty()) {
      d.coopMatShapes = nvidiaCoopMatShapes();
      d.coopMatLayout = nvidiaQuadLayout();
      d.coopMatLayout8 = nvidiaQuadLayout8();
      d.coopMatLayoutF16 = nvidiaQuadLayoutF16();
    }
  } else {
    d.coopMatShapes.clear();
    forEachPart(value, '+', [&](std::string_view part) { d.coopMatShapes.push_back(parseShape(key, part)); });
  }
}

std::string coopMatText(const DeviceInfo& d) {
  if (d.coopMatShapes.empty()) return "none";
  std::vector<std::string> shapes;
  for (const auto& s : d.coopMatShapes) {
    shapes.push_back(fmt::format("{}x{}x{}:{}:{}", s.m, s.n, s.k, dtypeName(s.input), dtypeName(s.accumulator)));
  }
  return fmt::format("{}", fmt::join(shapes, "+"));
}

CoopMatLayout parseLayout(std::string_view key, std::string_view value, const CoopMatLayout& nvidia) {
  const std::size_t slash = value.find('/');
  if (value == "none") return {};
  if (value == "nvidia-quad") return nvidia;
  if (slash == std::string_view::npos) {
    reject(key, value, "none, nvidia-quad, or rowOf/colOf as numbers joined by . (e.g. 0.0.8.8/0.1.0.1)");
  }
  return {parseList<std::uint8_t>(key, value.substr(0, slash), '.', 255),
          parseList<std::uint8_t>(key, value.substr(slash + 1), '.', 255)};
}

std::string layoutText(const CoopMatLayout& layout, const CoopMatLayout& nvidia) {
  if (layout == CoopMatLayout{}) return "none";
  if (layout == nvidia) return "nvidia-quad";
  return fmt::format("{}/{}", fmt::join(layout.rowOf, "."), fmt::join(layout.colOf, "."));
}

void setUuid(DeviceInfo& d, std::string_view key, std::string_view value) {
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (value.size() != 32 || !std::all_of(value.begin(), value.end(), hex)) reject(key, value, "32 hex digits");
  for (std::size_t i = 0; i < 16; ++i) {
    std::from_chars(value.data() + 2 * i, value.data() + 2 * i + 2, d.uuid[i], 16);
  }
}

std::string uuidText(const DeviceInfo& d) { return fmt::format("{:02x}", fmt::join(d.uuid, "")); }

/// Text values are written quoted, with " and \ escaped, so names may hold commas and spaces.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

// ---- the keys -----------------------------------------------------------------------------------------

struct Key {
  std::string_view name;
  std::function<void(DeviceInfo&, std::string_view key, std::string_view value)> set;
  std::function<std::string(const DeviceInfo&)> get;  ///< empty: a shorthand toString does not write
};

template <typename T>
Key number(std::string_view name, T DeviceInfo::*field) {
  return {name,
          [field](DeviceInfo& d, std::string_view key, std::string_view v) {
            d.*field = static_cast<T>(parseNumber(key, v, std::numeric_limits<T>::max()));
          },
          [field](const DeviceInfo& d) { return std::to_string(d.*field); }};
}

Key flag(std::string_view name, bool DeviceInfo::*field) {
  return {name, [field](DeviceInfo& d, std::string_view key, std::string_view v) { d.*field = parseFlag(key, v); },
          [field](const DeviceInfo& d) { return std::string(d.*field ? "1" : "0"); }};
}

Key text(std::string_view name, std::string DeviceInfo::*field) {
  return {name, [field](DeviceInfo& d, std::string_view, std::string_view v) { d.*field = v; },
          [field](const DeviceInfo& d) { return quote(d.*field); }};
}

/// An enum written as its name in lower case; `last` is the final enumerator.
template <typename E>
Key enumerated(std::string_view name, E DeviceInfo::*field, E last, std::string_view (*nameOf)(E)) {
  return {name,
          [=](DeviceInfo& d, std::string_view key, std::string_view v) {
            std::vector<std::string> accepted;
            for (int i = 0; i <= static_cast<int>(last); ++i) {
              accepted.push_back(lower(nameOf(static_cast<E>(i))));
              if (accepted.back() == lower(v)) {
                d.*field = static_cast<E>(i);
                return;
              }
            }
            reject(key, v, fmt::format("{}", fmt::join(accepted, ", ")));
          },
          [=](const DeviceInfo& d) { return lower(nameOf(d.*field)); }};
}

const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      text("name", &DeviceInfo::name),
      enumerated("vendor", &DeviceInfo::vendor, Vendor::Other, vendorName),
      enumerated("kind", &DeviceInfo::kind, DeviceKind::Other, deviceKindName),
      enumerated("family", &DeviceInfo::family, DeviceFamily::Other, deviceFamilyName),
      {"subgroup",
       [](DeviceInfo& d, std::string_view key, std::string_view v) {
         d.subgroupSize = d.minSubgroupSize = d.maxSubgroupSize =
             static_cast<std::uint32_t>(parseNumber(key, v, std::numeric_limits<std::uint32_t>::max()));
       },
       [](const DeviceInfo& d) { return std::to_string(d.subgroupSize); }},
      number("subgroup-min", &DeviceInfo::minSubgroupSize),
      number("subgroup-max", &DeviceInfo::maxSubgroupSize),
      flag("subgroup-control", &DeviceInfo::subgroupSizeControl),
      flag("subgroup-arithmetic", &DeviceInfo::subgroupArithmetic),
      flag("subgroup-shuffle", &DeviceInfo::subgroupShuffle),
      flag("subgroup-vote", &DeviceInfo::subgroupVote),
      number("shared", &DeviceInfo::maxSharedMemoryBytes),
      number("storage", &DeviceInfo::maxStorageBufferRange),
      number("alloc", &DeviceInfo::maxAllocationBytes),
      number("memory", &DeviceInfo::deviceMemoryBytes),
      number("invocations", &DeviceInfo::maxWorkgroupInvocations),
      {"workgroup-size",
       [](DeviceInfo& d, std::string_view key, std::string_view v) {
         const std::string text(v);
         std::size_t at = 0;
         for (std::size_t i = 0; i < 3; ++i) {
           const std::size_t end = i < 2 ? text.find('x', at) : text.size();
           if (end == std::string::npos || (i == 2 && text.find('x', at) != std::string::npos)) {
             reject(key, v, "three sizes as XxYxZ, e.g. 1024x1024x64");
           }
           d.maxWorkgroupSize[i] = static_cast<std::uint32_t>(
               parseNumber(key, std::string_view(text).substr(at, end - at), std::numeric_limits<std::uint32_t>::max()));
           at = end + 1;
         }
       },
       [](const DeviceInfo& d) { return fmt::format("{}", fmt::join(d.maxWorkgroupSize, "x")); }},
      number("push", &DeviceInfo::maxPushConstantBytes),
      flag("fp16", &DeviceInfo::fp16Arithmetic),
      flag("storage16", &DeviceInfo::storage16Bit),
      flag("clock", &DeviceInfo::shaderClock),
      flag("smids", &DeviceInfo::smBuiltins),
      flag("idot", &DeviceInfo::int8Dot),
      {"coopmat", setCoopMat, coopMatText},
      flag("cm2", &DeviceInfo::coopMat2),
      flag("cm2-bf16", &DeviceInfo::coopMat2Bf16),
      number("cm2-reserve", &DeviceInfo::coopMat2ReservedShared),
      number("cm2-invocations", &DeviceInfo::coopMat2MaxWorkgroup),
      {"layout",
       [](DeviceInfo& d, std::string_view key, std::string_view v) { d.coopMatLayout = parseLayout(key, v, nvidiaQuadLayout()); },
       [](const DeviceInfo& d) { return layoutText(d.coopMatLayout, nvidiaQuadLayout()); }},
      {"layout8",
       [](DeviceInfo& d, std::string_view key, std::string_view v) { d.coopMatLayout8 = parseLayout(key, v, nvidiaQuadLayout8()); },
       [](const DeviceInfo& d) { return layoutText(d.coopMatLayout8, nvidiaQuadLayout8()); }},
      {"layouth",
       [](DeviceInfo& d, std::string_view key, std::string_view v) {
         d.coopMatLayoutF16 = parseLayout(key, v, nvidiaQuadLayoutF16());
       },
       [](const DeviceInfo& d) { return layoutText(d.coopMatLayoutF16, nvidiaQuadLayoutF16()); }},
      {"quad",
       [](DeviceInfo& d, std::string_view key, std::string_view v) {
         const bool on = parseFlag(key, v) && !d.coopMatShapes.empty();
         d.coopMatLayout = on ? nvidiaQuadLayout() : CoopMatLayout{};
         d.coopMatLayout8 = on ? nvidiaQuadLayout8() : CoopMatLayout{};
         d.coopMatLayoutF16 = on ? nvidiaQuadLayoutF16() : CoopMatLayout{};
       },
       {}},
      number("cus", &DeviceInfo::computeUnits),
      number("loop-limit", &DeviceInfo::loopLimit),
      {"uuid", setUuid, uuidText},
      number("driver-version", &DeviceInfo::driverVersion),
      text("driver", &DeviceInfo::driverName),
  };
  return table;
}

/// Splits at the commas outside quotes; quotes and escapes are gone from the parts.
std::vector<std::string> items(const std::string& text) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '\\' && i + 1 < text.size()) {
      out.back() += text[++i];
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (quoted) throw UserError(kField, fmt::format("'{}' has a \" that is never closed", printable(text)));
  return out;
}

// The least a Vulkan implementation may report for each limit (the specification's required limits),
// and one compute unit: a device string below them describes no device, and would only fail later, in
// a planner's arithmetic.
struct Floor {
  std::string_view key;
  std::uint64_t value, least;
  std::string_view why;
};

void checkLimits(const DeviceInfo& d) {
  const Floor floors[] = {
      {"shared", d.maxSharedMemoryBytes, 16384, "Vulkan's least maxComputeSharedMemorySize"},
      {"invocations", d.maxWorkgroupInvocations, 128, "Vulkan's least maxComputeWorkGroupInvocations"},
      {"push", d.maxPushConstantBytes, 128, "Vulkan's least maxPushConstantsSize"},
      {"storage", d.maxStorageBufferRange, 1ull << 27, "Vulkan's least maxStorageBufferRange"},
      {"alloc", d.maxAllocationBytes, 1ull << 30, "Vulkan 1.1's least maxMemoryAllocationSize"},
      {"cus", d.computeUnits, 1, "a device has one at least"},
  };
  for (const Floor& f : floors) {
    if (f.value < f.least) reject(f.key, std::to_string(f.value), fmt::format("at least {} ({})", f.least, f.why));
  }
  const std::uint32_t leastSize[3] = {128, 128, 64};
  for (std::size_t i = 0; i < 3; ++i) {
    if (d.maxWorkgroupSize[i] < leastSize[i]) {
      reject("workgroup-size", fmt::format("{}", fmt::join(d.maxWorkgroupSize, "x")),
             "at least 128x128x64 (Vulkan's least maxComputeWorkGroupSize)");
    }
  }
  if (d.maxWorkgroupInvocations < d.maxSubgroupSize) {
    reject("invocations", std::to_string(d.maxWorkgroupInvocations),
           fmt::format("at least subgroup-max={} (a workgroup holds one whole subgroup at least)", d.maxSubgroupSize));
  }
}

void checkSubgroups(const DeviceInfo& d) {
  for (const auto& [key, n] : {std::pair{"subgroup", d.subgroupSize}, std::pair{"subgroup-min", d.minSubgroupSize},
                               std::pair{"subgroup-max", d.maxSubgroupSize}}) {
    if (n == 0 || (n & (n - 1)) != 0) throw UserError(kField, fmt::format("{}={} must be a power of two", key, n));
  }
  if (d.minSubgroupSize > d.subgroupSize || d.subgroupSize > d.maxSubgroupSize) {
    throw UserError(kField, fmt::format("subgroup={} must lie within subgroup-min={} and subgroup-max={}",
                                        d.subgroupSize, d.minSubgroupSize, d.maxSubgroupSize));
  }
}

}  // namespace

std::string DeviceInfo::toString() const {
  std::string out = "custom";
  for (const Key& key : keys()) {
    if (key.get) out += fmt::format(",{}={}", key.name, key.get(*this));
  }
  return out;
}

DeviceInfo parseDevicePreset(const std::string& text) {
  const auto parts = items(text);
  DeviceInfo d = parts.front() == "custom" ? DeviceInfo{} : devicePreset(parts.front());
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& item = parts[i];
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw UserError(kField, fmt::format("override '{}' must look like key=value", printable(item)));
    }
    const std::string_view key = std::string_view(item).substr(0, eq);
    const auto k = std::find_if(keys().begin(), keys().end(), [&](const Key& x) { return x.name == key; });
    if (k == keys().end()) {
      std::vector<std::string_view> names;
      for (const Key& x : keys()) names.push_back(x.name);
      throw UserError(kField, fmt::format("unknown key '{}'; accepted: {}", printable(key), fmt::join(names, ", ")));
    }
    k->set(d, key, std::string_view(item).substr(eq + 1));
  }
  checkSubgroups(d);
  checkLimits(d);
  return d;
}

}  // namespace foundry
