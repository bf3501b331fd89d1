#pragma once
// Progress of long work on stderr: on a terminal a bar with the count of finished units, the time
// since the phase began, the rate and an estimate of the time left; otherwise a plain line per tenth
// ("progress: prefill 3/22"), which scripts and the error suite read.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace foundry {

/// Where progress goes. `done` counts finished work (GPU work that has completed, not recorded).
class Progress {
 public:
  virtual ~Progress() = default;
  virtual void update(const std::string& phase, std::uint64_t done, std::uint64_t total) = 0;
  /// Clears the bar, if any, so that other output starts on a clean line.
  virtual void finish() {}
};

/// Progress nobody sees (a run's ranks other than rank 0).
class SilentProgress : public Progress {
 public:
  void update(const std::string&, std::uint64_t, std::uint64_t) override {}
};

/// A bar when `terminal`, plain lines otherwise.
std::unique_ptr<Progress> makeProgress(bool terminal);

/// The bar's line for `done` of `total` after `elapsed` seconds, without the leading "\r":
/// "prefill  [#######       ] 7/22  12.4 s  0.56/s  ~27 s left".
std::string progressBar(const std::string& phase, std::uint64_t done, std::uint64_t total, double elapsed);

}  // namespace foundry
