#pragma once
// The machinery of knobs, shared by every layer that owns some: a knob is a FOUNDRY_* name with its
// accepted values, parsed from text into one field of that layer's options struct (RuntimeOptions for
// the runtime, AttentionOptions for the attention steps). Options (foundry/steps/Options.h) reads the
// environment, a config's `tuning` object and CLI flags into all of them at once.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace foundry {

/// One documented knob.
struct KnobInfo {
  std::string_view name;      ///< FOUNDRY_...
  std::string_view accepted;  ///< the accepted values, as shown in errors and docs
  std::string_view help;
  bool emptyIsAValue = false;  ///< an empty value means something (FOUNDRY_GLSLC: none), not a slip
};

/// A tri-state forcing switch: let the selector decide, force on, or force off.
enum class Force { Auto, On, Off };

/// One knob of the options struct O: parses a text value into O (errors name `field`) and shows it.
template <typename O>
struct Knob {
  KnobInfo info;
  std::function<void(O&, const std::string& value, const std::string& field)> set;
  std::function<std::string(const O&)> get;
};

/// Where each knob of one options struct got its value: "environment", the JSON pointer
/// "/tuning/<key>", or the flag ("--set", "--device"). A knob not listed has its default.
struct KnobSources {
  std::map<std::string, std::string> byKnob;

  /// Where `knob` (FOUNDRY_...) got its value, or "default".
  std::string sourceOf(std::string_view knob) const;
  /// The field an error about `knob`'s value names: the config's JSON pointer when the value came from
  /// its `tuning`, else the knob's name.
  std::string fieldOf(std::string_view knob) const;
};

/// The FOUNDRY_* variables of the process environment, with HOME and XDG_CACHE_HOME. The only place
/// Foundry reads the environment.
std::map<std::string, std::string> processEnvironment();

/// A knob's key in a config's `tuning` object: its name without FOUNDRY_, in lower case.
std::string tuningKey(std::string_view knob);

/// A `tuning` value as the text a knob parses: strings as they are, booleans as 1/0, numbers as
/// written. Anything else is a UserError naming `field`.
std::string tuningText(const nlohmann::json& value, const std::string& field);

namespace knob {

[[noreturn]] void reject(const std::string& field, std::string_view value, std::string_view accepted);
bool parseBool(const std::string& field, const std::string& value);
std::uint32_t parseUint(const std::string& field, const std::string& value, std::uint32_t lo, std::uint32_t hi,
                        bool powerOfTwo, std::string_view accepted);
std::string show(const std::optional<std::uint32_t>& v);
std::string show(bool v);
std::string show(Force f);

/// A boolean knob stored in `Member`.
template <auto Member, typename O>
Knob<O> boolean(std::string_view name, std::string_view help) {
  return {{name, "0, 1, true, false, on, off", help},
          [](O& o, const std::string& v, const std::string& f) { o.*Member = parseBool(f, v); },
          [](const O& o) { return show(o.*Member); }};
}

/// An unsigned knob in [lo, hi] (a power of two if `pow2`), or "auto" (std::nullopt).
template <auto Member, typename O>
Knob<O> unsignedOrAuto(std::string_view name, std::string_view accepted, std::uint32_t lo, std::uint32_t hi, bool pow2,
                       std::string_view help) {
  return {{name, accepted, help},
          [=](O& o, const std::string& v, const std::string& f) {
            if (v == "auto" || v.empty()) o.*Member = std::nullopt;
            else o.*Member = parseUint(f, v, lo, hi, pow2, accepted);
          },
          [](const O& o) { return show(o.*Member); }};
}

/// A Force knob: auto, or a boolean.
template <auto Member, typename O>
Knob<O> force(std::string_view name, std::string_view help) {
  return {{name, "auto, 0, 1", help},
          [](O& o, const std::string& v, const std::string& f) {
            o.*Member = v == "auto" || v.empty() ? Force::Auto : (parseBool(f, v) ? Force::On : Force::Off);
          },
          [](const O& o) { return show(o.*Member); }};
}

/// A free-text knob.
template <auto Member, typename O>
Knob<O> text(std::string_view name, std::string_view accepted, std::string_view help, bool emptyIsAValue = false) {
  return {{name, accepted, help, emptyIsAValue}, [](O& o, const std::string& v, const std::string&) { o.*Member = v; },
          [](const O& o) { return o.*Member; }};
}

/// Every knob of `table` and its value in `options`, for logging and reports.
template <typename O>
std::vector<std::pair<std::string, std::string>> describe(const std::vector<Knob<O>>& table, const O& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& k : table) out.emplace_back(std::string(k.info.name), k.get(options));
  return out;
}

/// Each knob's value in `options` read back through the knob's own parser, so that a value set in C++
/// outside the accepted ones (`options.faDecodeWarps = 0`) is the UserError that value would be in the
/// environment, naming the knob, rather than reaching the code that relies on it.
template <typename O>
void validate(const std::vector<Knob<O>>& table, const O& options) {
  O scratch;
  for (const auto& k : table) k.set(scratch, k.get(options), std::string(k.info.name));
}

}  // namespace knob

}  // namespace foundry
