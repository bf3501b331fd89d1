#pragma once
// Every knob Foundry reads, parsed once: environment first, then a config's `tuning` object, then CLI
// flags. The runtime's knobs (RuntimeOptions) and the attention steps' (AttentionOptions) are parsed
// together, so an unknown FOUNDRY_* name is an error that lists every knob.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "foundry/RuntimeOptions.h"
#include "foundry/steps/AttentionOptions.h"

namespace foundry {

struct Options {
  RuntimeOptions runtime;
  AttentionOptions attention;

  /// Reads the process environment (processEnvironment()).
  static Options fromEnvironment();
  /// Parses a given environment (tests pass a map). Unknown FOUNDRY_* variables are an error.
  static Options fromEnvironment(const std::map<std::string, std::string>& env);

  /// Sets one knob by its variable name (FOUNDRY_...). `source` names where the value came from.
  void set(std::string_view name, std::string_view value, std::string_view source);
  /// Applies a config's `tuning` object; keys are knob names without FOUNDRY_, in lower case.
  /// Errors carry the JSON pointer `pointer`/key.
  void applyTuning(const nlohmann::json& tuning, const std::string& pointer);
  /// Every knob and its current value, in knobTable() order, for logging and reports.
  std::vector<std::pair<std::string, std::string>> describe() const;
  /// Where `knob` (FOUNDRY_...) got its value: "environment", "/tuning/<key>", a flag, or "default".
  std::string sourceOf(std::string_view knob) const;
};

/// Every knob: the attention steps', then the runtime's.
const std::vector<KnobInfo>& knobTable();

}  // namespace foundry
