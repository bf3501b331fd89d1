#include "foundry/runner/Progress.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace foundry {

namespace {

using Clock = std::chrono::steady_clock;

// Progress is worth no failed run: a stderr that cannot be written is left for the caller to notice
// (std::ferror), where fmt::print would throw.
void printProgress(const std::string& text) {
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

std::string seconds(double s) {
  if (s < 60) return fmt::format("{:.1f} s", s);
  return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

class TerminalProgress : public Progress {
 public:
  void update(const std::string& phase, std::uint64_t done, std::uint64_t total) override {
    if (phase != phase_) {
      phase_ = phase;
      start_ = Clock::now();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const std::string line = progressBar(phase, done, total, elapsed);
    // Pad over a longer previous line instead of clearing it, so the bar does not flicker.
    printProgress(fmt::format("\r{:<{}}", line, std::max(width_, line.size())));
    width_ = line.size();
  }
  void finish() override {
    if (width_ == 0) return;
    printProgress(fmt::format("\r{:<{}}\r", "", width_));
    width_ = 0;
    phase_.clear();
  }

 private:
  std::string phase_;
  Clock::time_point start_;
  std::size_t width_ = 0;
};

class LineProgress : public Progress {
 public:
  void update(const std::string& phase, std::uint64_t done, std::uint64_t total) override {
    // A line per phase start and per tenth of the work, not per step.
    const std::uint64_t tenth = std::max<std::uint64_t>(1, total / 10);
    if (phase != phase_ || done == total || done % tenth == 0) {
      printProgress(fmt::format("progress: {} {}/{}\n", phase, done, total));
      phase_ = phase;
    }
  }

 private:
  std::string phase_;
};

}  // namespace

std::string progressBar(const std::string& phase, std::uint64_t done, std::uint64_t total, double elapsed) {
  constexpr std::uint64_t kWidth = 24;
  const std::uint64_t filled = total ? std::min(kWidth, kWidth * done / total) : kWidth;
  std::string line = fmt::format("{:<8} [{}{}] {}/{}  {}", phase, std::string(filled, '#'),
                                 std::string(kWidth - filled, ' '), done, total, seconds(elapsed));
  if (done > 0 && elapsed > 0) {
    const double rate = done / elapsed;
    line += rate >= 1 ? fmt::format("  {:.1f}/s", rate) : fmt::format("  {}/unit", seconds(1 / rate));
    if (done < total) line += fmt::format("  ~{} left", seconds((total - done) / rate));
  }
  return line;
}

std::unique_ptr<Progress> makeProgress(bool terminal) {
  if (terminal) return std::make_unique<TerminalProgress>();
  return std::make_unique<LineProgress>();
}

}  // namespace foundry
