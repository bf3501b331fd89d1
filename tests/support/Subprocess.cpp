#include "support/Subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace foundry::test {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::filesystem::path tempFile(const char* tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / fmt::format("foundry-{}-XXXXXX", tag)).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error(fmt::format("mkstemp: {}", std::strerror(errno)));
  ::close(fd);
  return pattern;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<std::string> ProcessResult::errLines() const {
  std::vector<std::string> lines;
  std::istringstream s(err);
  for (std::string line; std::getline(s, line);) lines.push_back(line);
  return lines;
}

std::string ProcessResult::summary() const {
  std::string how = timedOut ? "timed out (a hang)"
                    : signal ? fmt::format("killed by signal {} ({})", signal, ::strsignal(signal))
                             : fmt::format("exit {}", exitCode);
  return fmt::format("{} after {:.1f} s\n--- stderr ---\n{}--- stdout ---\n{}", how, seconds, err, out);
}

Process::Process(const ProcessSpec& spec) : timeoutSeconds_(spec.timeoutSeconds) {
  if (spec.argv.empty()) throw std::invalid_argument("Process: empty argv");
  outPath_ = tempFile("out");
  errPath_ = tempFile("err");

  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : spec.env) {
    if (value)
      env[name] = *value;
    else
      env.erase(name);
  }
  std::vector<std::string> envStrings;
  for (const auto& [name, value] : env) envStrings.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string dir = spec.workDir.string();
  const std::string out = outPath_.string(), err = errPath_.string();
  const std::string outFile = spec.out.file.string(), errFile = spec.err.file.string();
  // A pipe whose read end is closed before the child starts: its writes fail with EPIPE (or SIGPIPE).
  int noReader[2] = {-1, -1};
  const bool wantsPipe = spec.out.kind == StreamTarget::Kind::PipeWithoutReader ||
                         spec.err.kind == StreamTarget::Kind::PipeWithoutReader;
  if (wantsPipe) {
    if (::pipe2(noReader, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
    ::close(noReader[0]);
  }

  started_ = now();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid_ == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    const int e = ::open(err.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    const int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0 || ::dup2(in, 0) < 0) ::_exit(126);
    const auto route = [&](const StreamTarget& target, int captured, const std::string& file, int fd) {
      switch (target.kind) {
        case StreamTarget::Kind::Captured:
          return ::dup2(captured, fd) >= 0;
        case StreamTarget::Kind::Closed:
          return ::close(fd) == 0;
        case StreamTarget::Kind::File: {
          const int f = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
          return f >= 0 && ::dup2(f, fd) >= 0;
        }
        case StreamTarget::Kind::PipeWithoutReader:
          return ::dup2(noReader[1], fd) >= 0;
      }
      return false;
    };
    if (!route(spec.out, o, outFile, 1) || !route(spec.err, e, errFile, 2)) ::_exit(126);
    if (spec.fileSizeLimit) {
      const rlimit limit{*spec.fileSizeLimit, *spec.fileSizeLimit};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
    }
    if (!dir.empty() && ::chdir(dir.c_str()) != 0) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (wantsPipe) ::close(noReader[1]);
}

Process::~Process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ec;
  std::filesystem::remove(outPath_, ec);
  std::filesystem::remove(errPath_, ec);
}

ProcessResult Process::wait() {
  ProcessResult r;
  if (pid_ <= 0) throw std::logic_error("Process::wait called twice");
  int status = 0;
  const double deadline = started_ + timeoutSeconds_;
  for (;;) {
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(fmt::format("waitpid: {}", std::strerror(errno)));
    if (now() > deadline) {
      r.timedOut = true;
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  r.seconds = now() - started_;
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp(outPath_);
  r.err = slurp(errPath_);
  return r;
}

ProcessResult runProcess(const ProcessSpec& spec) {
  return Process(spec).wait();
}

}  // namespace foundry::test
