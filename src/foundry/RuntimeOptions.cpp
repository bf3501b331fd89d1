#include "foundry/RuntimeOptions.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"

extern char** environ;

namespace foundry {

std::string_view partialStorageName(PartialStorage storage) {
  return storage == PartialStorage::Float ? "float" : "half";
}

namespace {

using Setter = std::function<void(RuntimeOptions&, const std::string& value, const std::string& field)>;
using Getter = std::function<std::string(const RuntimeOptions&)>;

struct Knob {
  KnobInfo info;
  Setter set;
  Getter get;
};

[[noreturn]] void reject(const std::string& field, std::string_view value, std::string_view accepted) {
  throw UserError(field, fmt::format("invalid value '{}'; accepted: {}", printable(value), accepted));
}

bool parseBool(const std::string& field, const std::string& v) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  reject(field, v, "0, 1, true, false, on, off");
}

std::uint32_t parseUint(const std::string& field, const std::string& v, std::uint32_t lo, std::uint32_t hi,
                        bool powerOfTwo, std::string_view accepted) {
  std::uint32_t out = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || out < lo || out > hi ||
      (powerOfTwo && (out & (out - 1)) != 0)) {
    reject(field, v, accepted);
  }
  return out;
}

std::string show(const std::optional<std::uint32_t>& v) { return v ? std::to_string(*v) : "auto"; }
std::string show(bool v) { return v ? "1" : "0"; }
std::string show(Force f) { return f == Force::Auto ? "auto" : (f == Force::On ? "1" : "0"); }

template <auto Member>
Knob boolKnob(std::string_view name, std::string_view help) {
  return {{name, "0, 1, true, false, on, off", help},
          [](RuntimeOptions& o, const std::string& v, const std::string& f) { o.*Member = parseBool(f, v); },
          [](const RuntimeOptions& o) { return show(o.*Member); }};
}

template <auto Member>
Knob uintKnob(std::string_view name, std::string_view accepted, std::uint32_t lo, std::uint32_t hi, bool pow2,
              std::string_view help) {
  return {{name, accepted, help},
          [=](RuntimeOptions& o, const std::string& v, const std::string& f) {
            if (v == "auto" || v.empty()) o.*Member = std::nullopt;
            else o.*Member = parseUint(f, v, lo, hi, pow2, accepted);
          },
          [](const RuntimeOptions& o) { return show(o.*Member); }};
}

template <auto Member>
Knob forceKnob(std::string_view name, std::string_view help) {
  return {{name, "auto, 0, 1", help},
          [](RuntimeOptions& o, const std::string& v, const std::string& f) {
            o.*Member = v == "auto" || v.empty() ? Force::Auto : (parseBool(f, v) ? Force::On : Force::Off);
          },
          [](const RuntimeOptions& o) { return show(o.*Member); }};
}

template <auto Member>
Knob stringKnob(std::string_view name, std::string_view accepted, std::string_view help) {
  return {{name, accepted, help},
          [](RuntimeOptions& o, const std::string& v, const std::string&) { o.*Member = v; },
          [](const RuntimeOptions& o) { return o.*Member; }};
}

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = {
      boolKnob<&RuntimeOptions::disableFa>(
          "FOUNDRY_DISABLE_FA", "FlashAttentionStep refuses to run and points at SdpaReferenceStep"),
      boolKnob<&RuntimeOptions::sdpaForceMaterialized>(
          "FOUNDRY_SDPA_FORCE_MATERIALIZED", "as FOUNDRY_DISABLE_FA: the materialised path must be chosen explicitly"),
      boolKnob<&RuntimeOptions::debugSdpa>("FOUNDRY_DEBUG_SDPA", "log attention shapes and selector decisions"),
      boolKnob<&RuntimeOptions::debugSdpaVerbose>("FOUNDRY_DEBUG_SDPA_VERBOSE",
                                                   "also log strides, push constants and grids"),
      boolKnob<&RuntimeOptions::sdpaDebugOnlineCompare>(
          "FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE", "run flash and reference once per shape; log max-abs and relative error"),
      uintKnob<&RuntimeOptions::faPrefillWarps>("FOUNDRY_FA_PREFILL_WARPS", "auto, 1, 2, 4, 8", 1, 8, true,
                                                "subgroups per prefill workgroup"),
      uintKnob<&RuntimeOptions::faPrefillSplitK>("FOUNDRY_FA_PREFILL_SPLIT_K", "auto or 1..64", 1, 64, false,
                                                 "prefill Split-K factor (1 = off)"),
      boolKnob<&RuntimeOptions::disableFaPrefillSplitK>("FOUNDRY_DISABLE_FA_PREFILL_SPLITK",
                                                        "never split prefill over the KV length"),
      forceKnob<&RuntimeOptions::faPrefillCoopMat>("FOUNDRY_FA_PREFILL_COOPMAT",
                                                   "force the cooperative-matrix prefill variant on or off"),
      forceKnob<&RuntimeOptions::faPrefillRegisterSoftmax>(
          "FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX",
          "cooperative-matrix prefill: softmax in registers (needs the probed quad layout) or through shared memory"),
      uintKnob<&RuntimeOptions::faPrefillKeysPerTile>("FOUNDRY_FA_PREFILL_KEYS_PER_TILE", "auto, 4, 8, 16, 32, 64, 128", 4,
                                                       128, true, "keys per prefill K/V tile in shared memory"),
      forceKnob<&RuntimeOptions::faPrefillHeadsFirst>(
          "FOUNDRY_FA_PREFILL_HEADS_FIRST",
          "prefill grid order: heads vary fastest (1) or each head's query tiles in turn (0)"),
      uintKnob<&RuntimeOptions::faDecodeWarps>("FOUNDRY_FA_DECODE_WARPS", "auto, 1, 2, 4, 8, 16", 1, 16, true,
                                               "subgroups per decode workgroup"),
      uintKnob<&RuntimeOptions::faDecodeKeysPerWarp>("FOUNDRY_FA_DECODE_KEYS_PER_WARP",
                                                     "auto, 1, 2, 4, ..., 256", 1, 256, true,
                                                     "keys each decode subgroup takes per step"),
      boolKnob<&RuntimeOptions::faDecodeScalar>(
          "FOUNDRY_FA_DECODE_SCALAR", "decode without subgroup operations (reductions through shared memory)"),
      {{"FOUNDRY_FA_DECODE_TG_OUT", "auto, float, half", "storage of decode partials in shared memory"},
       [](RuntimeOptions& o, const std::string& v, const std::string& f) {
         if (v == "auto" || v.empty()) o.faDecodeTgOut = std::nullopt;
         else if (v == "float") o.faDecodeTgOut = PartialStorage::Float;
         else if (v == "half") o.faDecodeTgOut = PartialStorage::Half;
         else reject(f, v, "auto, float, half");
       },
       [](const RuntimeOptions& o) {
         return o.faDecodeTgOut ? std::string(partialStorageName(*o.faDecodeTgOut)) : std::string("auto");
       }},
      uintKnob<&RuntimeOptions::faDecodeVectorWidth>("FOUNDRY_FA_DECODE_VEC", "auto, 1, 2, 4, 8", 1, 8, true,
                                                     "elements per K/V load in decode (8: f16 only)"),
      uintKnob<&RuntimeOptions::faDecodeUnroll>("FOUNDRY_FA_DECODE_UNROLL", "auto, 1, 2, 4, 8", 1, 8, true,
                                                 "decode steps whose K/V loads a subgroup issues together"),
      uintKnob<&RuntimeOptions::faDecodeSplitK>("FOUNDRY_FA_DECODE_SPLIT_K", "auto or 1..256", 1, 256, false,
                                                "decode Split-K factor (1 = off)"),
      forceKnob<&RuntimeOptions::faDecodeFusedReduce>(
          "FOUNDRY_FA_DECODE_FUSED_REDUCE",
          "decode Split-K: the last workgroup of each head group merges the splits (1) or a reduce kernel does (0)"),
      stringKnob<&RuntimeOptions::device>("FOUNDRY_DEVICE", "a device index or a name substring",
                                          "which Vulkan device to use"),
      stringKnob<&RuntimeOptions::cacheDir>("FOUNDRY_CACHE_DIR", "a directory, or off",
                                            "SPIR-V and pipeline cache location (default $XDG_CACHE_HOME/foundry)"),
      stringKnob<&RuntimeOptions::dumpKernels>("FOUNDRY_DUMP_KERNELS", "a directory",
                                               "write each built kernel's .comp and .json there"),
      stringKnob<&RuntimeOptions::kernelDir>("FOUNDRY_KERNEL_DIR", "a directory holding kernels/*.glsl",
                                             "read GLSL snippets from disk instead of the binary"),
      {{"FOUNDRY_LOG_LEVEL", "trace, debug, info, warn, error, off", "log verbosity"},
       [](RuntimeOptions& o, const std::string& v, const std::string& f) {
         static const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "off"};
         if (std::find(levels.begin(), levels.end(), v) == levels.end()) {
           reject(f, v, "trace, debug, info, warn, error, off");
         }
         o.logLevel = v;
       },
       [](const RuntimeOptions& o) { return o.logLevel; }},
      boolKnob<&RuntimeOptions::validation>("FOUNDRY_VALIDATION",
                                            "enable VK_LAYER_KHRONOS_validation with synchronization checks"),
  };
  return table;
}

const Knob* findKnob(std::string_view name) {
  for (const auto& k : knobs()) {
    if (k.info.name == name) return &k;
  }
  return nullptr;
}

std::string allKnobNames() {
  std::string out;
  for (const auto& k : knobs()) {
    if (!out.empty()) out += ", ";
    out += k.info.name;
  }
  return out;
}

std::string tuningKey(std::string_view name) {
  std::string key(name.substr(std::string_view("FOUNDRY_").size()));
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  return key;
}

}  // namespace

const std::vector<KnobInfo>& knobTable() {
  static const std::vector<KnobInfo> infos = [] {
    std::vector<KnobInfo> out;
    for (const auto& k : knobs()) out.push_back(k.info);
    return out;
  }();
  return infos;
}

void RuntimeOptions::set(std::string_view name, std::string_view value, std::string_view source) {
  const Knob* knob = findKnob(name);
  const std::string field = source.empty() ? std::string(name) : fmt::format("{} ({})", name, source);
  if (!knob) {
    throw UserError(field, fmt::format("unknown knob; accepted: {}", allKnobNames()));
  }
  knob->set(*this, std::string(value), field);
  if (!source.empty()) sources[std::string(name)] = std::string(source);
}

RuntimeOptions RuntimeOptions::fromEnvironment(const std::map<std::string, std::string>& env) {
  RuntimeOptions o;
  for (const auto& [name, value] : env) {
    if (name == "HOME") o.homeDir = value;
    else if (name == "XDG_CACHE_HOME") o.xdgCacheHome = value;
    else if (name.starts_with("FOUNDRY_")) o.set(name, value, "environment");
  }
  return o;
}

RuntimeOptions RuntimeOptions::fromEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (name.starts_with("FOUNDRY_") || name == "HOME" || name == "XDG_CACHE_HOME") {
      env[name] = entry.substr(eq + 1);
    }
  }
  return fromEnvironment(env);
}

void RuntimeOptions::applyTuning(const nlohmann::json& tuning, const std::string& pointer) {
  if (!tuning.is_object()) {
    throw UserError(pointer, fmt::format("expected an object of knob values, found {}", tuning.type_name()));
  }
  for (const auto& [key, value] : tuning.items()) {
    const std::string field = pointer + "/" + key;
    const Knob* match = nullptr;
    for (const auto& k : knobs()) {
      if (tuningKey(k.info.name) == key) match = &k;
    }
    if (!match) {
      std::string accepted;
      for (const auto& k : knobs()) accepted += (accepted.empty() ? "" : ", ") + tuningKey(k.info.name);
      throw UserError(field, fmt::format("unknown tuning key; accepted: {}", accepted));
    }
    std::string text;
    if (value.is_string()) text = value.get<std::string>();
    else if (value.is_boolean()) text = value.get<bool>() ? "1" : "0";
    // Numbers as written (4294967297, -1, 1e+30), so a value out of range is shown as given.
    else if (value.is_number()) text = value.dump();
    else throw UserError(field, fmt::format("expected a string, number or boolean, found {}", value.type_name()));
    match->set(*this, text, field);
    sources[std::string(match->info.name)] = field;
  }
}

std::vector<std::pair<std::string, std::string>> RuntimeOptions::describe() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& k : knobs()) out.emplace_back(std::string(k.info.name), k.get(*this));
  return out;
}

std::string RuntimeOptions::sourceOf(std::string_view knob) const {
  const auto it = sources.find(std::string(knob));
  return it == sources.end() ? "default" : it->second;
}

std::string RuntimeOptions::fieldOf(std::string_view knob) const {
  const std::string source = sourceOf(knob);
  return source.starts_with("/") ? source : std::string(knob);
}

}  // namespace foundry
