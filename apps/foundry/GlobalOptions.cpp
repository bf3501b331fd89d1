#include <fmt/format.h>

#include "foundry/Error.h"
#include "Commands.h"

namespace foundry::cli {

Options GlobalOptions::resolve() const {
  Options o = Options::fromEnvironment();
  applyTo(o);
  return o;
}

void GlobalOptions::applyTo(Options& o) const {
  for (const auto& k : knobs) {
    const auto eq = k.find('=');
    if (eq == std::string::npos) throw UserError("--set", "expected NAME=VALUE, got '" + printable(k) + "'");
    std::string name = k.substr(0, eq);
    if (!name.starts_with("FOUNDRY_")) name = "FOUNDRY_" + name;
    o.set(name, k.substr(eq + 1), "--set");
  }
  if (!device.empty()) o.set("FOUNDRY_DEVICE", device, "--device");
  if (!logLevel.empty()) o.set("FOUNDRY_LOG_LEVEL", logLevel, "--log-level");
  if (validation) o.set("FOUNDRY_VALIDATION", "1", "--validation");
}

std::string describeParseError(CLI::App& app, const CLI::ParseError& error) {
  std::string what = error.what();
  if (error.get_name() == "RequiredError" && app.get_subcommands().empty()) {
    std::string names;
    for (const auto* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
    const auto extra = app.remaining();
    what = extra.empty()                   ? std::string("a subcommand is required")
           : extra.front().starts_with("-") ? "unknown option '" + extra.front() + "'; a subcommand is required"
                                            : "unknown subcommand '" + extra.front() + "'";
    what += "; accepted: " + names;
  }
  return what + " (see foundry --help)";
}

void refuseEmptyValues(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_items_expected_max() == 0) continue;  // a flag: it takes no value
    const std::string type = option->get_type_name();
    const std::string refusal = type == "PATH"  ? "'' is not a file path"
                                : type == "DIR" ? "'' is not a directory path"
                                : type == "UINT" || type == "INT" || type == "FLOAT"
                                    ? "'' is not a number"
                                    : fmt::format("'' is empty; accepted: {}", option->get_description());
    option->check(CLI::Validator([refusal](std::string& v) { return v.empty() ? refusal : std::string(); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands({})) refuseEmptyValues(*sub);
}

}  // namespace foundry::cli
