#include "foundry/Error.h"
#include "foundry/cli/Commands.h"

namespace foundry::cli {

RuntimeOptions GlobalOptions::resolve() const {
  RuntimeOptions o = RuntimeOptions::fromEnvironment();
  for (const auto& k : knobs) {
    const auto eq = k.find('=');
    if (eq == std::string::npos) throw UserError("--set", "expected NAME=VALUE, got '" + k + "'");
    std::string name = k.substr(0, eq);
    if (!name.starts_with("FOUNDRY_")) name = "FOUNDRY_" + name;
    o.set(name, k.substr(eq + 1), "--set");
  }
  if (!device.empty()) o.set("FOUNDRY_DEVICE", device, "--device");
  if (!logLevel.empty()) o.set("FOUNDRY_LOG_LEVEL", logLevel, "--log-level");
  if (validation) o.validation = true;
  return o;
}

}  // namespace foundry::cli
