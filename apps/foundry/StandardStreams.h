#pragma once
// stdout and stderr that may not be writable: closed (`>&-`), full (`> /dev/full`) or a pipe whose
// reader is gone. A failed write never ends the process (no SIGPIPE, no exception escaping while an
// error is printed); it is reported through the exit code (4, a device/file error) when the command
// itself succeeded.
#include <string_view>
#include <system_error>

namespace foundry::cli {

/// Run first in main: a closed stdin, stdout or stderr gets a descriptor that refuses writes (so no
/// file the program opens later takes its number and receives its output), and SIGPIPE and SIGXFSZ
/// are ignored, so a closed pipe or the file-size limit fails the write (EPIPE, EFBIG) instead.
void prepareStandardStreams();

/// "foundry: <kind>: <message>" on stderr. Never throws: a stderr that cannot take it is seen by
/// finishStandardStreams().
void printErrorLine(std::string_view kind, std::string_view message);

/// `text` on stdout. Never throws, unlike fmt::print: for output that must not stop the files a
/// command writes after it; a failure is seen by finishStandardStreams().
void printOut(std::string_view text);

/// The exit code of a command that returned `code`, once stdout is flushed: `code` when it is not 0;
/// otherwise 4 when a write to stdout or stderr failed (saying so on stderr if stdout was the one),
/// else 0. `stdoutError` is the error a write to stdout threw, when one did.
int finishStandardStreams(int code, std::error_code stdoutError = {});

/// Whether a write to stdout has failed: an exception the command threw is then that failure.
bool stdoutFailed();

}  // namespace foundry::cli
