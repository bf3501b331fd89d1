#include <fmt/format.h>

#include "Commands.h"
#include "Table.h"

namespace foundry::cli {

void addKnobsCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("knobs", "List every knob with its accepted values and current value");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown, "Print a Markdown table (docs/knobs.md is made from it)");
  cmd->callback([&global, &action, markdown] {
    action = [&global, markdown] {
      const auto current = global.resolve().describe();
      if (*markdown) {
        fmt::print("| variable | accepted | what it does |\n|---|---|---|\n");
        for (const auto& k : knobTable()) fmt::print("| `{}` | {} | {} |\n", k.name, k.accepted, k.help);
        return 0;
      }
      Table t({"knob", "value", "accepted", "what it does"});
      for (std::size_t i = 0; i < knobTable().size(); ++i) {
        const auto& k = knobTable()[i];
        t.row({std::string(k.name), current[i].second, std::string(k.accepted), std::string(k.help)});
      }
      fmt::print("{}", t.str());
      return 0;
    };
  });
}

}  // namespace foundry::cli
