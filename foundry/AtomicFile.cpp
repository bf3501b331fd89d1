#include "foundry/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

void writeFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  static std::atomic<unsigned> counter{0};
  const auto tmp = path.parent_path() /
                   fmt::format(".{}.tmp.{}.{}", path.filename().string(), ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw DeviceError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw DeviceError(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw DeviceError(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw DeviceError(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
  }
}

void checkWritableTarget(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw DeviceError(fmt::format("cannot write {}: {}", path.string(), std::strerror(EISDIR)));
  }
  const auto probe = path.parent_path() / fmt::format(".{}.probe.{}", path.filename().string(), ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw DeviceError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

void writeFileAtomically(const std::filesystem::path& path, std::string_view text) {
  writeFileAtomically(path, std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()));
}

std::optional<std::vector<std::byte>> readWholeFile(const std::filesystem::path& path, std::size_t maxBytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct ::stat st {};
  std::optional<std::vector<std::byte>> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) <= maxBytes) {
    out.emplace(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < out->size()) {
      const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (done != out->size()) out.reset();  // changed size while read: treat as unreadable
  }
  ::close(fd);
  return out;
}

std::optional<std::string> nonRegularFile(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::not_found:
    case fs::file_type::none:
    case fs::file_type::regular: return std::nullopt;
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block:
    case fs::file_type::character: return "a device";
    default: return "a special file";
  }
}

}  // namespace foundry
