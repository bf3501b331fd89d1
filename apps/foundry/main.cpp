// The `foundry` executable: parses the command line with CLI11, runs one subcommand, and turns each
// kind of error into one line on stderr and its own exit code.
#include <cstdio>
#include <exception>
#include <system_error>

#include <fmt/format.h>

#include "Commands.h"
#include "StandardStreams.h"
#include "foundry/Error.h"

namespace {

int runCommand(int argc, char** argv) {
  using namespace foundry;
  // Named here, or CLI11 takes argv[0] and the usage line shows the build path.
  CLI::App app{"Foundry: fused attention kernels for Vulkan, stitched from stages and compiled at run time", "foundry"};
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
  cli::refuseEmptyValues(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    cli::printErrorLine(errorKindName(ErrorKind::User), cli::describeParseError(app, e));
    return exitCodeFor(ErrorKind::User);
  }
  try {
    return action ? action() : 0;
  } catch (const Error& e) {
    std::fflush(stdout);
    cli::printErrorLine(errorKindName(e.kind()), e.what());
    return exitCodeFor(e.kind());
  } catch (const std::exception& e) {
    // fmt::print throws when stdout cannot be written: that is an output failure, not a bug.
    const auto* io = dynamic_cast<const std::system_error*>(&e);
    if (io && cli::stdoutFailed()) return cli::finishStandardStreams(0, io->code());
    std::fflush(stdout);
    cli::printErrorLine(errorKindName(ErrorKind::Internal), e.what());
    return exitCodeFor(ErrorKind::Internal);
  }
}

}  // namespace

int main(int argc, char** argv) {
  foundry::cli::prepareStandardStreams();
  return foundry::cli::finishStandardStreams(runCommand(argc, argv));
}
