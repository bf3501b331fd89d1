#include "foundry/steps/Options.h"

#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"

namespace foundry {

namespace {

/// One knob of either table, bound to the options object and the sources it sets.
struct BoundKnob {
  KnobInfo info;
  std::function<void(const std::string& value, const std::string& field)> set;
  KnobSources* sources;
};

template <typename O>
void bind(std::vector<BoundKnob>& out, O& options) {
  for (const auto& k : O::knobs()) {
    out.push_back({k.info, [&options, &k](const std::string& v, const std::string& f) { k.set(options, v, f); },
                   &options.sources});
  }
}

std::vector<BoundKnob> bound(Options& o) {
  std::vector<BoundKnob> out;
  bind(out, o.attention);
  bind(out, o.runtime);
  return out;
}

// FOUNDRY_X= in the environment customarily stands for "unset"; an empty value from a flag or a config's
// `tuning` is a mistake, unless empty is one of the knob's values (FOUNDRY_GLSLC: none).
void refuseEmpty(const KnobInfo& info, std::string_view value, const std::string& field) {
  if (value.empty() && !info.emptyIsAValue) knob::reject(field, value, info.accepted);
}

}  // namespace

const std::vector<KnobInfo>& knobTable() {
  static const std::vector<KnobInfo> infos = [] {
    std::vector<KnobInfo> out;
    for (const auto& k : AttentionOptions::knobs()) out.push_back(k.info);
    for (const auto& k : RuntimeOptions::knobs()) out.push_back(k.info);
    return out;
  }();
  return infos;
}

void Options::set(std::string_view name, std::string_view value, std::string_view source) {
  const std::string field = source.empty() ? std::string(name) : fmt::format("{} ({})", name, source);
  for (const auto& k : bound(*this)) {
    if (k.info.name != name) continue;
    if (source != "environment") refuseEmpty(k.info, value, field);
    k.set(std::string(value), field);
    if (!source.empty()) k.sources->byKnob[std::string(name)] = std::string(source);
    return;
  }
  std::string all;
  for (const auto& k : knobTable()) all += (all.empty() ? "" : ", ") + std::string(k.name);
  throw UserError(field, fmt::format("unknown knob; accepted: {}", all));
}

Options Options::fromEnvironment(const std::map<std::string, std::string>& env) {
  Options o;
  for (const auto& [name, value] : env) {
    if (name == "HOME") o.runtime.homeDir = value;
    else if (name == "XDG_CACHE_HOME") o.runtime.xdgCacheHome = value;
    else if (name.starts_with("FOUNDRY_")) o.set(name, value, "environment");
  }
  return o;
}

Options Options::fromEnvironment() { return fromEnvironment(processEnvironment()); }

void Options::applyTuning(const nlohmann::json& tuning, const std::string& pointer) {
  if (!tuning.is_object()) {
    throw UserError(pointer, fmt::format("expected an object of knob values, found {}", tuning.type_name()));
  }
  const auto knobs = bound(*this);
  for (const auto& [key, value] : tuning.items()) {
    const std::string field = pointer + "/" + key;
    const BoundKnob* match = nullptr;
    for (const auto& k : knobs) {
      if (tuningKey(k.info.name) == key) match = &k;
    }
    if (!match) {
      std::string accepted;
      for (const auto& k : knobTable()) accepted += (accepted.empty() ? "" : ", ") + tuningKey(k.name);
      throw UserError(field, fmt::format("unknown tuning key; accepted: {}", accepted));
    }
    const std::string text = tuningText(value, field);
    refuseEmpty(match->info, text, field);
    match->set(text, field);
    match->sources->byKnob[std::string(match->info.name)] = field;
  }
}

std::vector<std::pair<std::string, std::string>> Options::describe() const {
  auto out = attention.describe();
  for (auto& entry : runtime.describe()) out.push_back(std::move(entry));
  return out;
}

std::string Options::sourceOf(std::string_view knob) const {
  const std::string fromAttention = attention.sourceOf(knob);
  return fromAttention != "default" ? fromAttention : runtime.sourceOf(knob);
}

}  // namespace foundry
