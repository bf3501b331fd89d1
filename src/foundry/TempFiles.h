#pragma once
// The hidden temporary files an atomic write makes beside its target: their names, the ones this
// process has open (removed when SIGINT, SIGTERM or SIGHUP ends it) and the ones that processes which
// no longer exist left behind.
#include <sys/types.h>

#include <filesystem>
#include <string_view>

namespace foundry {

/// A fresh name for a temporary beside `target`: ".<name>.tmp.<pid>.<n>". When that would pass
/// NAME_MAX (255 bytes), <name> is cut short and ends in "~" and a hash of the whole name.
std::filesystem::path temporaryPathFor(const std::filesystem::path& target);

/// The process a temporary's file name says made it, or 0 when `fileName` is not such a name.
pid_t temporaryOwner(std::string_view fileName);

/// Removes the temporaries in `directory` whose owner process no longer exists (kill(pid, 0) says
/// ESRCH). Looks at each directory once per process: the first write there pays for the scan.
void removeDeadTemporaries(const std::filesystem::path& directory);

/// A temporary file beside a target, created (O_EXCL) and open for writing. While it exists,
/// SIGINT, SIGTERM and SIGHUP unlink it before the signal ends the process: the first one installs
/// those handlers, for the signals whose disposition is still the default (a handler the application
/// installed is left alone). The destructor closes and removes it unless it was renamed over its target.
class TemporaryFile {
 public:
  /// Throws std::system_error with the errno of open() when the file cannot be created.
  TemporaryFile(const std::filesystem::path& target, mode_t mode);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  /// Closes the descriptor; throws std::system_error when close() reports a failed write.
  void close();
  /// Renames the file over `target`, after which it is no longer a temporary; throws std::system_error.
  void renameOver(const std::filesystem::path& target);

 private:
  void registerPath();
  void unregisterPath();

  std::filesystem::path path_;
  int fd_ = -1;
  int slot_ = -1;  ///< in the registry the signal handler reads; -1 when it was full
  bool renamed_ = false;
};

}  // namespace foundry
