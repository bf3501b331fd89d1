#include "foundry/TempFiles.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "foundry/Hash.h"

namespace foundry {

namespace fs = std::filesystem;

namespace {

// The registry the signal handler reads. It cannot take a lock or allocate, so it is a fixed array of
// slots, each a path and an atomic word: (generation << 2) | state. The handler copies a live slot's
// path and unlinks the copy only if the word did not change meanwhile (the slot was not reused).
constexpr int kSlots = 64;
constexpr std::uint64_t kFree = 0, kFilling = 1, kLive = 2, kStateMask = 3;

struct Slot {
  std::atomic<std::uint64_t> word{0};
  char path[PATH_MAX];
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the signal handler needs a lock-free word");

Slot gSlots[kSlots];

constexpr int kCleanedSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void removeLiveTemporariesAndReraise(int sig) {
  const int savedErrno = errno;
  for (auto& slot : gSlots) {
    const std::uint64_t before = slot.word.load(std::memory_order_acquire);
    if ((before & kStateMask) != kLive) continue;
    char copy[PATH_MAX];
    std::memcpy(copy, slot.path, sizeof copy);
    if (slot.word.load(std::memory_order_acquire) == before) ::unlink(copy);
  }
  // The default action, now that the files are gone: the signal stays blocked until this returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  errno = savedErrno;
}

void installSignalCleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int sig : kCleanedSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) continue;
      if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = removeLiveTemporariesAndReraise;
      sigemptyset(&sa.sa_mask);
      for (const int other : kCleanedSignals) sigaddset(&sa.sa_mask, other);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

std::uint64_t parseDigits(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty() ? value : 0;
}

}  // namespace

fs::path temporaryPathFor(const fs::path& target) {
  static std::atomic<std::uint64_t> counter{0};
  const std::string name = target.filename().string();
  const std::string suffix = fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));
  constexpr std::size_t kHashDigits = 16;
  if (1 + name.size() + suffix.size() <= NAME_MAX) return target.parent_path() / fmt::format(".{}{}", name, suffix);
  const std::string_view kept = std::string_view(name).substr(0, NAME_MAX - 2 - kHashDigits - suffix.size());
  return target.parent_path() / fmt::format(".{}~{}{}", kept, hashHex(name).substr(0, kHashDigits), suffix);
}

pid_t temporaryOwner(std::string_view fileName) {
  const auto at = fileName.rfind(".tmp.");
  if (!fileName.starts_with('.') || at == std::string_view::npos || at == 0) return 0;
  const std::string_view rest = fileName.substr(at + 5);  // "<pid>.<n>"
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos || rest.substr(dot + 1).empty()) return 0;
  for (const char c : rest.substr(dot + 1)) {
    if (c < '0' || c > '9') return 0;
  }
  const std::uint64_t pid = parseDigits(rest.substr(0, dot));
  return pid > 0 && pid <= std::uint64_t(INT_MAX) ? static_cast<pid_t>(pid) : 0;
}

void removeDeadTemporaries(const fs::path& directory) {
  // Never destroyed: a Runtime held in a static saves its pipeline cache as it is destroyed at exit,
  // which may come after this function's statics would have been.
  static std::mutex& mutex = *new std::mutex;
  static std::set<fs::path>& scanned = *new std::set<fs::path>;
  const fs::path dir = directory.empty() ? fs::path(".") : directory;
  std::error_code ec;
  const fs::path key = fs::weakly_canonical(dir, ec);
  {
    const std::lock_guard lock(mutex);
    if (!scanned.insert(ec ? dir : key).second) return;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t owner = temporaryOwner(it->path().filename().string());
    if (owner == 0 || owner == ::getpid()) continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive, or someone else's (EPERM)
    std::error_code typeError;
    if (it->symlink_status(typeError).type() == fs::file_type::regular) ::unlink(it->path().c_str());
  }
}

TemporaryFile::TemporaryFile(const fs::path& target, mode_t mode) {
  installSignalCleanup();
  // A name can only be taken by a temporary of a dead process that had our pid: try the next one.
  for (int attempt = 0;; ++attempt) {
    path_ = temporaryPathFor(target);
    registerPath();  // before the file exists, so that no moment leaves it unregistered
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd_ >= 0) return;
    const int error = errno;
    unregisterPath();
    if (error != EEXIST || attempt == 15) throw std::system_error(error, std::generic_category());
  }
}

TemporaryFile::~TemporaryFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!renamed_) ::unlink(path_.c_str());
  unregisterPath();
}

void TemporaryFile::close() {
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw std::system_error(errno, std::generic_category());
}

void TemporaryFile::renameOver(const fs::path& target) {
  if (::rename(path_.c_str(), target.c_str()) != 0) throw std::system_error(errno, std::generic_category());
  renamed_ = true;
}

void TemporaryFile::registerPath() {
  const std::string& text = path_.native();
  if (text.size() >= PATH_MAX) return;  // open() refuses it anyway
  for (int i = 0; i < kSlots; ++i) {
    std::uint64_t word = gSlots[i].word.load(std::memory_order_acquire);
    if ((word & kStateMask) != kFree) continue;
    const std::uint64_t generation = word >> 2;
    if (!gSlots[i].word.compare_exchange_strong(word, (generation << 2) | kFilling)) continue;
    std::memcpy(gSlots[i].path, text.c_str(), text.size() + 1);
    gSlots[i].word.store(((generation + 1) << 2) | kLive, std::memory_order_release);
    slot_ = i;
    return;
  }
}

void TemporaryFile::unregisterPath() {
  if (slot_ < 0) return;
  const std::uint64_t word = gSlots[slot_].word.load(std::memory_order_relaxed);
  gSlots[slot_].word.store(((word >> 2) << 2) | kFree, std::memory_order_release);
  slot_ = -1;
}

}  // namespace foundry
