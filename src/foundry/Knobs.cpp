#include "foundry/Knobs.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"

extern char** environ;

namespace foundry {

std::string KnobSources::sourceOf(std::string_view knob) const {
  const auto it = byKnob.find(std::string(knob));
  return it == byKnob.end() ? "default" : it->second;
}

std::string KnobSources::fieldOf(std::string_view knob) const {
  const std::string source = sourceOf(knob);
  return source.starts_with("/") ? source : std::string(knob);
}

std::map<std::string, std::string> processEnvironment() {
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
  return env;
}

std::string tuningKey(std::string_view name) {
  std::string key(name.substr(std::string_view("FOUNDRY_").size()));
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  return key;
}

std::string tuningText(const nlohmann::json& value, const std::string& field) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  // Numbers as written (4294967297, -1, 1e+30), so a value out of range is shown as given.
  if (value.is_number()) return value.dump();
  throw UserError(field, fmt::format("expected a string, number or boolean, found {}", value.type_name()));
}

namespace knob {

void reject(const std::string& field, std::string_view value, std::string_view accepted) {
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

}  // namespace knob

}  // namespace foundry
