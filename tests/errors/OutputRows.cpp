// Rows for what a command writes: an output path that names one of the command's inputs or another
// output, under any spelling; what an atomic write does with what it finds at the path (a link, a
// FIFO, a device, a file with its own mode, a name near NAME_MAX, a temporary a dead process left);
// a disk that fills up during a run; and a stdout or stderr that cannot be written.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "errors/ErrorRows.h"
#include "errors/RowFiles.h"

namespace foundry::errors {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Check = std::function<std::string(const CliContext&, const CliOutcome&)>;
using StreamKind = test::StreamTarget::Kind;

/// What the identity rows put in the input an output would replace: it must still be there after.
const std::string kInputBytes = "an input of the run; the paths are compared before it is read\n";
/// The summary `foundry run` prints on stdout starts with this.
const std::string kSummary = "TinyLlama-1.1B on ";
/// A file name of 250 bytes: legal (NAME_MAX is 255), but ".<name>.tmp.<pid>.<n>" would not be.
const std::string kLongName = std::string(245, 'n') + ".json";

/// "" when `p` holds a whole `foundry run` report.
std::string wholeReport(const fs::path& p) {
  try {
    return json::parse(readText(p)).contains("model") ? "" : p.string() + " is not a run report";
  } catch (const std::exception& e) {
    return fmt::format("{} is not whole JSON: {}", p.string(), e.what());
  }
}

/// The row's directory holds only `entries`, and `relative` still holds kInputBytes.
Check inputKept(std::string relative, std::vector<std::string> entries) {
  return [relative, only = leavesOnly(std::move(entries))](const CliContext& ctx, const CliOutcome& o) -> std::string {
    if (readText(ctx.tmp / relative) != kInputBytes) return relative + " was changed";
    return only(ctx, o);
  };
}

/// The TinyLlama config and `relative` holding kInputBytes.
std::function<void(const CliContext&)> tinyAndInput(std::string relative) {
  return [relative](const CliContext& ctx) {
    copyTiny(ctx);
    writeBytes(ctx.tmp / relative, kInputBytes);
  };
}

/// The pid of a child that has exited and been reaped: no process has it (until the system reuses it).
pid_t deadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

test::StreamTarget closed() {
  return {StreamKind::Closed, {}};
}
test::StreamTarget devFull() {
  return {StreamKind::File, "/dev/full"};
}

std::vector<CliRow> identityRows() {
  return {
      {.id = "RunJsonIsTheConfig",
       .area = "output paths",
       .input = "`--json` naming the config",
       .args = runTiny({"--json", kTiny}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment =
           "--json: {tmp}/tinyllama.json is also the config file; writing it would replace an input of this run",
       .note = "before the config is read; the config is left as it was",
       .check = [](const CliContext& ctx, const CliOutcome&) -> std::string {
         const bool same = readText(ctx.tmp / "tinyllama.json") == readText(ctx.source / "configs/tinyllama-1.1b.json");
         return same ? "" : "the config was changed";
       }},
      {.id = "RunSaveIsTheInputs",
       .area = "output paths",
       .input = "`--save` naming the `--inputs` file",
       .args = runTiny({"--inputs", "{tmp}/inputs.safetensors", "--save", "{tmp}/inputs.safetensors"}),
       .setup = tinyAndInput("inputs.safetensors"),
       .exitCode = 2,
       .fragment = "--save: {tmp}/inputs.safetensors is also the --inputs file",
       .note = "the inputs are left as they were",
       .check = inputKept("inputs.safetensors", {"tinyllama.json", "inputs.safetensors"})},
      {.id = "RunJsonIsTheExpect",
       .area = "output paths",
       .input = "`--json` naming the `--expect` file",
       .args = runTiny({"--expect", "{tmp}/expected.safetensors", "--json", "{tmp}/expected.safetensors"}),
       .setup = tinyAndInput("expected.safetensors"),
       .exitCode = 2,
       .fragment = "--json: {tmp}/expected.safetensors is also the --expect file",
       .note = "the golden file is left as it was",
       .check = inputKept("expected.safetensors", {"tinyllama.json", "expected.safetensors"})},
      {.id = "RunSaveIsTheJson",
       .area = "output paths",
       .input = "`--save` and `--json` naming one new file",
       .args = runTiny({"--json", "{tmp}/out", "--save", "{tmp}/out"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--save: {tmp}/out is also the --json file; one output would replace the other",
       .note = "compared by canonical path, as neither exists yet",
       .check = leavesOnly({"tinyllama.json"})},
      {.id = "RunSaveIsALinkToTheInputs",
       .area = "output paths",
       .input = "`--save` naming a symbolic link to the `--inputs` file",
       .args = runTiny({"--inputs", "{tmp}/inputs.safetensors", "--save", "{tmp}/alias.safetensors"}),
       .setup =
           [](const CliContext& ctx) {
             tinyAndInput("inputs.safetensors")(ctx);
             fs::create_symlink("inputs.safetensors", ctx.tmp / "alias.safetensors");
           },
       .exitCode = 2,
       .fragment = "--save: {tmp}/alias.safetensors is also the --inputs file {tmp}/inputs.safetensors",
       .note = "files are compared by device and inode, not by spelling",
       .check = inputKept("inputs.safetensors", {"tinyllama.json", "inputs.safetensors", "alias.safetensors"})},
      {.id = "RunJsonIsAHardLinkToTheExpect",
       .area = "output paths",
       .input = "`--json` naming a hard link to the `--expect` file",
       .args = runTiny({"--expect", "{tmp}/expected.safetensors", "--json", "{tmp}/report.json"}),
       .setup =
           [](const CliContext& ctx) {
             tinyAndInput("expected.safetensors")(ctx);
             fs::create_hard_link(ctx.tmp / "expected.safetensors", ctx.tmp / "report.json");
           },
       .exitCode = 2,
       .fragment = "--json: {tmp}/report.json is also the --expect file {tmp}/expected.safetensors",
       .check = inputKept("expected.safetensors", {"tinyllama.json", "expected.safetensors", "report.json"})},
      {.id = "KernelsDumpIsTheConfig",
       .area = "output paths",
       .input = "`kernels --dump` naming the `--config` file",
       .args = {"kernels", "--config", kTiny, "--pretend", "h200", "--dump", kTiny},
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--dump: {tmp}/tinyllama.json is also the --config file",
       .check = leavesOnly({"tinyllama.json"})},
  };
}

std::vector<CliRow> atomicWriteRows() {
  return {
      {.id = "RunJsonThroughASymlink",
       .area = "output files",
       .input = "`--json` naming a symbolic link to a file in another directory",
       .args = runTiny({"--json", "{tmp}/report.json"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeBytes(ctx.tmp / "reports" / "real.json", "an old report\n");
             fs::create_symlink("reports/real.json", ctx.tmp / "report.json");
           },
       .exitCode = 0,
       .fragment = kSummary,
       .note = "the link is followed: the file it names is replaced atomically (its temporary made beside "
               "it) and the link stays",
       .quiet = true,
       .check = [](const CliContext& ctx, const CliOutcome&) -> std::string {
         if (!fs::is_symlink(fs::symlink_status(ctx.tmp / "report.json"))) return "report.json is no longer a link";
         return wholeReport(ctx.tmp / "reports" / "real.json");
       }},
      {.id = "RunJsonIntoAFifo",
       .area = "output files",
       .input = "`--json` naming a FIFO",
       .args = runTiny({"--json", "{tmp}/fifo"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             if (::mkfifo((ctx.tmp / "fifo").c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
           },
       .exitCode = 2,
       .fragment = "--json: cannot write {tmp}/fifo: it is a FIFO; outputs are regular files",
       .note = "before the run, without opening it (nothing blocks)",
       .check = leavesOnly({"tinyllama.json", "fifo"})},
      {.id = "RunSaveToDevNull",
       .area = "output files",
       .input = "`--save` naming /dev/null",
       .args = runTiny({"--save", "/dev/null"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--save: cannot write /dev/null: it is a character device",
       .note = "a device node is refused, not written in place: replacing it would replace the device; leave "
               "`--save` out to discard the outputs"},
      {.id = "RunSaveToStdoutPipe",
       .area = "output files",
       .input = "`--save /dev/stdout` with stdout a pipe",
       .args = runTiny({"--save", "/dev/stdout"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--save: cannot write /dev/stdout: it is a FIFO; outputs are regular files",
       .stdoutTo = {StreamKind::PipeWithoutReader, {}}},
      {.id = "RunSaveToStdoutFile",
       .area = "output files",
       .input = "`--save /dev/stdout` with stdout a file",
       .args = runTiny({"--save", "/dev/stdout"}),
       .setup = copyTiny,
       .exitCode = 2,
       .fragment = "--save: cannot write /dev/stdout: it is this process's standard output; name a file of its own",
       .note = "replacing the file would lose the report written to it"},
      {.id = "RunJsonKeepsTheMode",
       .area = "output files",
       .input = "`--json` replacing a file of mode 0600",
       .args = runTiny({"--json", "{tmp}/report.json"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeBytes(ctx.tmp / "report.json", "an old report\n");
             fs::permissions(ctx.tmp / "report.json", fs::perms::owner_read | fs::perms::owner_write);
           },
       .exitCode = 0,
       .fragment = kSummary,
       .note = "the new file keeps mode 0600 (and its owner, where the process may set it)",
       .quiet = true,
       .check = [](const CliContext& ctx, const CliOutcome&) -> std::string {
         const auto mode = fs::status(ctx.tmp / "report.json").permissions() & fs::perms::mask;
         if (mode != (fs::perms::owner_read | fs::perms::owner_write)) {
           return fmt::format("report.json has mode {:o}, not 600", static_cast<unsigned>(mode));
         }
         return wholeReport(ctx.tmp / "report.json");
       }},
      {.id = "RunJsonLongName",
       .area = "output files",
       .input = "`--json` naming a file of 250 bytes (NAME_MAX is 255)",
       .args = runTiny({"--json", "{tmp}/" + kLongName}),
       .setup = copyTiny,
       .exitCode = 0,
       .fragment = kSummary,
       .note = "written: the temporary's name is shortened to fit, with a hash of the whole name",
       .quiet = true,
       .check = [](const CliContext& ctx, const CliOutcome&) -> std::string {
         return wholeReport(ctx.tmp / kLongName);
       }},
      {.id = "RunJsonRemovesADeadTemporary",
       .area = "output files",
       .input = "a temporary that a process which no longer exists left beside `--json`",
       .args = runTiny({"--json", "{tmp}/report.json"}),
       .setup =
           [](const CliContext& ctx) {
             copyTiny(ctx);
             writeBytes(ctx.tmp / fmt::format(".report.json.tmp.{}.0", deadPid()), "half a report");
           },
       .exitCode = 0,
       .fragment = kSummary,
       .note = "the write removes it (its name holds the pid, and kill(pid, 0) says ESRCH)",
       .quiet = true,
       .check = leavesOnly({"tinyllama.json", "report.json"})},
      {.id = "RunSaveOutOfSpace",
       .area = "output files",
       .input = "a disk that fills up while `--save` is written (a 32 KiB file-size limit)",
       .args = runTiny({"--save", "{tmp}/outputs.safetensors", "--json", "{tmp}/report.json"}, kWithPrefill),
       .env = {{"FOUNDRY_CACHE_DIR", "off"}},
       .setup = copyTiny,
       .exitCode = 4,
       .fragment = "--save: cannot write {tmp}/outputs.safetensors: File too large",
       .note = "the summary is still printed and `--json` still written, saying the save failed",
       .check = [](const CliContext& ctx, const CliOutcome& o) -> std::string {
         if (o.out.find(kSummary) == std::string::npos) return "no summary on stdout";
         if (fs::exists(ctx.tmp / "outputs.safetensors")) return "outputs.safetensors exists";
         const json report = json::parse(readText(ctx.tmp / "report.json"));
         if (report.at("save").at("written") != false) return "report.json does not say the save failed";
         return "";
       },
       .fileSizeLimit = 32768},
  };
}

std::vector<CliRow> standardStreamRows() {
  return {
      {.id = "DevicesStdoutClosed",
       .area = "standard streams",
       .input = "stdout closed",
       .args = {"devices"},
       .exitCode = 4,
       .fragment = "cannot write to stdout: Bad file descriptor",
       .stdoutTo = closed()},
      {.id = "DevicesStdoutFull",
       .area = "standard streams",
       .input = "stdout on a full device",
       .args = {"devices"},
       .exitCode = 4,
       .fragment = "cannot write to stdout: No space left on device",
       .stdoutTo = devFull()},
      {.id = "DevicesStdoutBrokenPipe",
       .area = "standard streams",
       .input = "stdout a pipe whose reader has exited",
       .args = {"devices"},
       .exitCode = 4,
       .fragment = "cannot write to stdout: Broken pipe",
       .note = "SIGPIPE is ignored: the write fails with EPIPE",
       .stdoutTo = {StreamKind::PipeWithoutReader, {}}},
      {.id = "RunStdoutFullJsonWritten",
       .area = "standard streams",
       .input = "stdout on a full device during a run with `--json`",
       .args = runTiny({"--json", "{tmp}/report.json"}),
       .setup = copyTiny,
       .exitCode = 4,
       .fragment = "cannot write to stdout: No space left on device",
       .note = "`--json` is still written",
       .check = [](const CliContext& ctx, const CliOutcome&) { return wholeReport(ctx.tmp / "report.json"); },
       .stdoutTo = devFull()},
      {.id = "RunStderrClosed",
       .area = "standard streams",
       .input = "stderr closed during a run that succeeds",
       .args = runTiny({}),
       .setup = copyTiny,
       .exitCode = 4,
       .fragment = kSummary,
       .note = "the run completes and prints its summary; its progress lines could not be written",
       .stderrTo = closed()},
      {.id = "RunErrorWithStderrClosed",
       .area = "standard streams",
       .input = "stderr closed, and an error to report",
       .args = {"run", "{tmp}/missing.json"},
       .exitCode = 2,
       .note = "the exit code still says what the message could not",
       .stderrTo = closed()},
      {.id = "UnknownSubcommandStderrFull",
       .area = "standard streams",
       .input = "stderr on a full device, and an error to report",
       .args = {"frobnicate"},
       .exitCode = 2,
       .note = "the exit code still says what the message could not",
       .stderrTo = devFull()},
  };
}

}  // namespace

std::vector<CliRow> outputRows() {
  std::vector<CliRow> rows = identityRows();
  for (auto& r : atomicWriteRows()) rows.push_back(std::move(r));
  for (auto& r : standardStreamRows()) rows.push_back(std::move(r));
  return rows;
}

}  // namespace foundry::errors
