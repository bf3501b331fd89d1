// The `foundry` executable: parses the command line with CLI11, runs one subcommand, and turns each
// kind of error into one line on stderr and its own exit code.
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/cli/Commands.h"

namespace {

// The last guard before the terminal: each line of a message as printable() shows it, so no control
// character or NUL a site failed to escape reaches it. A compile error keeps its line breaks.
std::string forTerminal(const std::string& message) {
  std::string out;
  std::size_t begin = 0;
  for (std::size_t end; (end = message.find('\n', begin)) != std::string::npos; begin = end + 1) {
    out += foundry::printable(std::string_view(message).substr(begin, end - begin), std::string::npos) + '\n';
  }
  return out + foundry::printable(std::string_view(message).substr(begin), std::string::npos);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace foundry;
  CLI::App app{"Foundry: fused attention kernels for Vulkan, stitched from stages and compiled at run time"};
  app.set_version_flag("--version", fmt::format("foundry {}", FOUNDRY_VERSION));
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand: `foundry bench --set FA_DECODE_WARPS=4`
  cli::GlobalOptions global;
  app.add_option("--device", global.device, "Vulkan device: index or name substring (FOUNDRY_DEVICE)");
  app.add_option("--log-level", global.logLevel, "trace, debug, info, warn, error, off (FOUNDRY_LOG_LEVEL)");
  app.add_option("--set", global.knobs, "Set a knob: NAME=VALUE, e.g. --set FA_DECODE_WARPS=4");
  app.add_flag("--validation", global.validation, "Enable the Khronos validation layer (FOUNDRY_VALIDATION)");
  cli::Action action;
  cli::addDevicesCommand(app, global, action);
  cli::addKnobsCommand(app, global, action);
  cli::addKernelsCommand(app, global, action);
  cli::addBenchCommand(app, global, action);
  cli::addRunCommand(app, global, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "foundry: {}: {}\n", errorKindName(ErrorKind::User),
               forTerminal(cli::describeParseError(app, e)));
    return exitCodeFor(ErrorKind::User);
  }
  try {
    return action ? action() : 0;
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "foundry: {}: {}\n", errorKindName(e.kind()), forTerminal(e.what()));
    return exitCodeFor(e.kind());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "foundry: internal error: {}\n", forTerminal(e.what()));
    return exitCodeFor(ErrorKind::Internal);
  }
}
