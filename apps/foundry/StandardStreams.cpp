#include "StandardStreams.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "foundry/Error.h"

namespace foundry::cli {

void prepareStandardStreams() {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // /dev/null opened read-only: writes to it fail with EBADF, as they did on the closed descriptor.
    const int held = ::open("/dev/null", O_RDONLY);
    if (held >= 0 && held != fd) {
      ::dup2(held, fd);
      ::close(held);
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
}

namespace {

// The last guard before the terminal: each line of a message as printable() shows it, so no control
// character or NUL a site failed to escape reaches it. A compile error keeps its line breaks.
std::string forTerminal(std::string_view message) {
  std::string out;
  std::size_t begin = 0;
  for (std::size_t end; (end = message.find('\n', begin)) != std::string_view::npos; begin = end + 1) {
    out += printable(message.substr(begin, end - begin), std::string::npos) + '\n';
  }
  return out + printable(message.substr(begin), std::string::npos);
}

}  // namespace

void printErrorLine(std::string_view kind, std::string_view message) {
  const std::string line = fmt::format("foundry: {}: {}\n", kind, forTerminal(message));
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void printOut(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

bool stdoutFailed() {
  return std::ferror(stdout) != 0;
}

int finishStandardStreams(int code, std::error_code stdoutError) {
  errno = 0;
  const bool flushFailed = std::fflush(stdout) != 0;
  const int flushErrno = errno;
  const bool outFailed = flushFailed || std::ferror(stdout) != 0;
  if (code != 0) return code;
  if (outFailed) {
    const std::string why = stdoutError  ? stdoutError.message()
                            : flushErrno ? std::string(std::strerror(flushErrno))
                                         : std::string("a write failed");
    printErrorLine(errorKindName(ErrorKind::Device), fmt::format("cannot write to stdout: {}", why));
  }
  const bool errFailed = std::fflush(stderr) != 0 || std::ferror(stderr) != 0;
  return outFailed || errFailed ? exitCodeFor(ErrorKind::Device) : 0;
}

}  // namespace foundry::cli
