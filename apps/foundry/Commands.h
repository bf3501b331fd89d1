#pragma once
// The subcommands of the `foundry` executable. Each registers its options on a CLI11 app and returns
// the function that runs it; errors are thrown as foundry::Error and mapped to exit codes in main.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "foundry/steps/Options.h"

namespace foundry::cli {

/// Options every subcommand shares; CLI values are applied over the environment's.
struct GlobalOptions {
  std::string device;
  std::string logLevel;
  std::vector<std::string> knobs;  ///< --set NAME=VALUE
  bool validation = false;

  /// The environment's options with these flags applied on top.
  Options resolve() const;
  /// Applies these flags over `options` (which may already hold a config's tuning).
  void applyTo(Options& options) const;
};

using Action = std::function<int()>;

/// One line for a command-line parse error; names the subcommands when none was recognised.
std::string describeParseError(CLI::App& app, const CLI::ParseError& error);

/// Refuses an empty value at every option of `app` and its subcommands that takes one, naming the
/// option and what it takes (its type: PATH, DIR, a number; else its description): no value given as
/// '' is taken for "not given". Called once every option is registered.
void refuseEmptyValues(CLI::App& app);

void addDevicesCommand(CLI::App& app, const GlobalOptions& global, Action& action);
void addKnobsCommand(CLI::App& app, const GlobalOptions& global, Action& action);
void addKernelsCommand(CLI::App& app, const GlobalOptions& global, Action& action);
void addBenchCommand(CLI::App& app, const GlobalOptions& global, Action& action);
void addRunCommand(CLI::App& app, const GlobalOptions& global, Action& action);

}  // namespace foundry::cli
