#pragma once
// The error suite: one row per wrong input (a file, a flag, a knob, an environment, a tensor), each
// with the outcome a user must get — the error kind, a fragment of the one-line message, and the
// `foundry` exit code. Rows are plain data; ErrorSuiteTest.cpp runs them and docs/reliability.md is
// generated from them (`foundry_error_table`), so the table and the tests cannot drift apart.
//
// Two kinds of row:
// - CliRow: runs the real `foundry` executable as a subprocess with arguments, environment and input
//   files, and checks exit code, stderr and that no partial output file is left behind;
// - InProcessRow: calls the library (config loader, safetensors reader, attention step, runtime)
//   directly; checks the error's kind, field and message, and that exitCodeFor(kind) is the row's exit
//   code. Most have a CLI twin in RunRows.cpp; `cliPending` says why the others have none.
//
// CLI exit codes: 0 success, 1 a numerical check that failed (`foundry run --expect`), 2..4 an error
// of each kind (docs/reliability.md). `foundry run` also prints progress lines on stderr
// ("foundry: prefill 1/1", "foundry: decode 2/2") when stderr is not a terminal; the suite sets them
// aside before it counts the lines a row printed.
#include <filesystem>
#include <functional>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foundry/Error.h"
#include "support/Subprocess.h"

namespace foundry {
class Runtime;
}

namespace foundry::errors {

/// What a CLI row's setup and checks can use.
struct CliContext {
  std::filesystem::path tmp;     ///< a fresh directory for this row ("{tmp}" in args and env)
  std::filesystem::path source;  ///< the source tree (kernels/, configs/)
  /// Runs `foundry` with `args` and `env` changes ("{tmp}" substituted); returns its stdout. Throws
  /// std::runtime_error when it exits non-zero. For setups that need an earlier run.
  std::function<std::string(const std::vector<std::string>& args,
                            const std::map<std::string, std::optional<std::string>>& env)>
      foundry;
};

/// What a finished CLI run left: for checks beyond exit code and stderr.
struct CliOutcome {
  int exitCode = -1;
  std::string out, err;
  double seconds = 0;  ///< wall time of the run
};

struct CliRow {
  std::string id;     ///< gtest-safe name, unique
  std::string area;   ///< table section: "command line", "knobs", "device", "kernels", "files", "cache", ...
  std::string input;  ///< what the user did, for the table (Markdown)
  std::vector<std::string> args;                          ///< after `foundry`; "{tmp}" substituted
  std::map<std::string, std::optional<std::string>> env;  ///< nullopt unsets; "{tmp}" substituted
  std::function<void(const CliContext&)> setup;           ///< creates input files (may be empty)
  int exitCode = 0;
  std::string fragment;    ///< must appear in stderr (the error line, or the warning for exit 0)
  std::string note;        ///< extra outcome for the table, e.g. "no file left behind"
  bool multiLine = false;  ///< the message quotes source lines after the error line (compile errors)
  /// Exit 0 with nothing on stderr: `fragment` must then appear on stdout (a run that succeeds).
  bool quiet = false;
  /// Exit 0 with log lines on stderr (a debug knob's output): `fragment` must be in one of them, and
  /// none may be a warning or an error.
  bool logs = false;
  /// Further checks; return "" when they pass, else what went wrong.
  std::function<std::string(const CliContext&, const CliOutcome&)> check;
  /// Where `foundry`'s stdout and stderr go; "{tmp}" in a file is substituted. With stderr not
  /// captured, the error line cannot be checked: `fragment` (may be empty) must then be on stdout.
  test::StreamTarget stdoutTo, stderrTo;
  std::optional<std::uint64_t> fileSizeLimit;  ///< RLIMIT_FSIZE in bytes: a disk that fills up
  /// A run still going after this long is killed and fails the row as hung.
  double timeoutSeconds = 300;
};

/// What an in-process row's action can use.
struct InProcessContext {
  std::filesystem::path tmp;
  std::function<Runtime&()> runtime;  ///< the test device (lavapipe in CI); only for needsDevice rows
};

struct InProcessRow {
  std::string id;
  std::string area;
  std::string input;
  std::string via;  ///< the library call that reads the input, for the table ("loadModelConfig")
  ErrorKind kind = ErrorKind::User;
  std::optional<std::string> field;  ///< UserError::field() (a JSON pointer, knob or tensor); unchecked if unset
  std::string fragment;              ///< must appear in what()
  std::string note;
  std::function<void(const InProcessContext&)> action;  ///< must throw the row's error
  std::string mentions;  ///< must also appear in what(), "{tmp}" substituted (e.g. the file's path)
  bool needsDevice = false;
  /// Why no subcommand reaches this input, for the table; empty when a CLI row gives the same input to
  /// `foundry` (the rows of RunRows.cpp for config and safetensors files).
  std::string cliPending;
};

/// Rows that run `foundry` with the subcommands that exist today (CliRows.cpp).
std::vector<CliRow> cliRows();
/// Rows for `foundry run` (RunRows.cpp).
std::vector<CliRow> runCommandRows();
/// Rows for what `foundry run` reads and compares: non-finite values against --check and --expect,
/// safetensors files read lazily, the memory a run needs (InputRows.cpp).
std::vector<CliRow> inputRows();
/// Rows for config values the schema and the loader must treat alike (ConfigRows.cpp).
std::vector<CliRow> configRows();
/// Rows for output paths, atomic writes and unwritable stdout/stderr (OutputRows.cpp).
std::vector<CliRow> outputRows();
/// Rows for cache entries that are not files or hold SPIR-V a driver would refuse, for messages
/// quoting what a user wrote, and one run per knob of knobTable() (CacheKnobRows.cpp).
std::vector<CliRow> cacheKnobRows();
/// Rows that call the library directly (InProcessRows.cpp).
std::vector<InProcessRow> inProcessRows();

/// Every CLI row: cliRows(), runCommandRows(), inputRows(), configRows(), outputRows(), then
/// cacheKnobRows().
std::vector<CliRow> allCliRows();

/// The Markdown table of every row, as docs/reliability.md holds it.
std::string markdownTable();

/// `text` with "{tmp}" replaced by `tmp`.
std::string substituteTmp(const std::string& text, const std::filesystem::path& tmp);

/// The kernel cache of a `foundry` the suite runs without naming one (FOUNDRY_CACHE_DIR): the suite's,
/// the directory FOUNDRY_CACHE_DIR names in the test's own environment (ctest gives every suite one,
/// tests/CMakeLists.txt), so that a kernel is compiled once rather than once per row; without one, a
/// fresh one in the row's directory `tmp`. Entries are keyed by their GLSL and compiler, written
/// atomically, and two processes may fill one directory at once (CacheConcurrency.*), so a row sees
/// what it would see with a cache of its own, less the compiling. The rows whose input is the cache
/// itself name their own ({tmp}/cache).
std::filesystem::path defaultCache(const std::filesystem::path& tmp);

}  // namespace foundry::errors
