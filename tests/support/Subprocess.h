#pragma once
// Runs a program as a child process with its own environment, capturing stdout and stderr, with a
// deadline: a child that outlives it is killed and reported as hung. Used by the error suite to run
// the real `foundry` executable and by the concurrency tests to run two of them at once.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace foundry::test {

/// Where a child's stdout or stderr goes: captured (the default), closed (`>&-`), a file opened for
/// writing (`> /dev/full`) or a pipe whose reader has already gone.
struct StreamTarget {
  enum class Kind { Captured, Closed, File, PipeWithoutReader };
  Kind kind = Kind::Captured;
  std::filesystem::path file;  ///< for Kind::File
};

struct ProcessSpec {
  std::vector<std::string> argv;  ///< argv[0] is the program's path
  /// Changes to the inherited environment: a value sets the variable, nullopt removes it.
  std::map<std::string, std::optional<std::string>> env;
  std::filesystem::path workDir;  ///< empty: the test's own
  double timeoutSeconds = 300;
  StreamTarget out, err;                       ///< not captured unless Kind::Captured
  std::optional<std::uint64_t> fileSizeLimit;  ///< RLIMIT_FSIZE in bytes: a full disk, as `prlimit --fsize`
};

struct ProcessResult {
  int exitCode = -1;  ///< -1 when the child did not exit normally
  int signal = 0;     ///< the signal that ended it, if one did
  bool timedOut = false;
  std::string out, err;
  double seconds = 0;

  /// stderr's lines (without their newlines).
  std::vector<std::string> errLines() const;
  /// "exit 2 after 0.1 s; stderr: ..." for assertion messages.
  std::string summary() const;
};

/// A started child. wait() collects it; the destructor kills one that was never waited for.
class Process {
 public:
  explicit Process(const ProcessSpec& spec);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  ProcessResult wait();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  double timeoutSeconds_;
  std::filesystem::path outPath_, errPath_;
  double started_ = 0;
};

/// Starts `spec` and waits for it.
ProcessResult runProcess(const ProcessSpec& spec);

}  // namespace foundry::test
