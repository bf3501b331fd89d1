// `foundry run --save` ended by a signal while it writes: the file it replaces must be as it was and
// its hidden temporary must be gone. The signal is sent the moment inotify sees the temporary's first
// bytes written (a run also creates one early, empty, to learn that the path is writable), so it
// lands inside the write of 8 MiB, not before or after it.
#include <signal.h>
#include <sys/inotify.h>
#include <poll.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "errors/ErrorRows.h"
#include "support/Subprocess.h"
#include "support/TempDir.h"

namespace foundry {
namespace {

namespace fs = std::filesystem;

/// Waits up to `seconds` for a file whose name starts with `prefix` to be written to in the directory
/// `fd` watches; true when one was.
bool awaitWritten(int fd, const std::string& prefix, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  alignas(inotify_event) char buffer[64 * 1024];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buffer + at);
      if (e->len > 0 && std::string(e->name).rfind(prefix, 0) == 0) return true;
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  return false;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class InterruptedWrite : public ::testing::TestWithParam<int> {};

TEST_P(InterruptedWrite, LeavesTheOldFileAndNoTemporary) {
  const int signal = GetParam();
  test::TempDir dir;
  std::ofstream(dir.path() / "o.safetensors") << "an earlier run's outputs";
  const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_GE(::inotify_add_watch(fd, dir.path().c_str(), IN_MODIFY), 0) << std::strerror(errno);

  test::ProcessSpec spec;
  // 16 sequences of 128 tokens, one layer: 8 MiB of outputs, from a prefill lavapipe runs in seconds.
  spec.argv = {FOUNDRY_EXECUTABLE, "run", fs::path(FOUNDRY_SOURCE_DIR) / "configs" / "tinyllama-1.1b.json",
               "--prompt-len", "127", "--batch", "16", "--decode-tokens", "1", "--layers", "1", "--no-check",
               "--save", "o.safetensors"};
  spec.env["FOUNDRY_CACHE_DIR"] = errors::defaultCache(dir.path()).string();
  spec.env["FOUNDRY_LOG_LEVEL"] = "warn";
  spec.workDir = dir.path();
  spec.timeoutSeconds = 120;
  test::Process run(spec);
  const bool written = awaitWritten(fd, ".o.safetensors.tmp.", 100);
  if (written) ::kill(run.pid(), signal);
  const test::ProcessResult r = run.wait();
  ::close(fd);

  ASSERT_TRUE(written) << "no temporary beside o.safetensors was written to: " << r.summary();
  EXPECT_EQ(r.signal, signal) << "the signal did not end the run inside its write: " << r.summary();
  EXPECT_EQ(slurp(dir.path() / "o.safetensors"), "an earlier run's outputs");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path().filename() != ".cache") left.push_back(e.path().filename().string());
  }
  EXPECT_THAT(left, ::testing::ElementsAre("o.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptedWrite, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const auto& p) { return std::string(sigabbrev_np(p.param)); });

}  // namespace
}  // namespace foundry
