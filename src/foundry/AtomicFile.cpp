#include "foundry/AtomicFile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "foundry/Error.h"
#include "foundry/FileIdentity.h"
#include "foundry/TempFiles.h"

namespace foundry {

namespace fs = std::filesystem;

namespace {

const char* describeFileType(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

std::string withFlag(std::string_view flag, const std::string& message) {
  return flag.empty() ? message : fmt::format("{}: {}", flag, message);
}

[[noreturn]] void cannotWrite(const fs::path& path, std::string_view flag, int error) {
  throw DeviceError(withFlag(flag, fmt::format("cannot write {}: {}", path.string(), std::strerror(error))));
}

struct Target {
  fs::path file;                        ///< where the bytes go: the path with its links followed
  std::optional<struct stat> existing;  ///< the regular file there now, if any
};

// Whether `st` is the file this process's standard output or error writes to.
const char* standardStreamAt(const struct stat& st) {
  for (const auto& [fd, name] : {std::pair{1, "standard output"}, std::pair{2, "standard error"}}) {
    struct stat s {};
    if (::fstat(fd, &s) == 0 && s.st_dev == st.st_dev && s.st_ino == st.st_ino) return name;
  }
  return nullptr;
}

Target inspect(const fs::path& path, std::string_view flag) {
  struct stat named {};  // as the kernel resolves the path
  const bool exists = ::stat(path.c_str(), &named) == 0;
  if (const char* stream = exists && S_ISREG(named.st_mode) ? standardStreamAt(named) : nullptr) {
    throw UserError(std::string(flag),
                    fmt::format("cannot write {}: it is this process's {}; name a file of its own", path.string(), stream));
  }
  Target target{followSymlinks(path), std::nullopt};
  struct stat st {};
  if (::stat(target.file.c_str(), &st) != 0) {
    if (errno != ENOENT) cannotWrite(path, flag, errno);
    if (!exists) return target;
    // A link that only the kernel resolves (/dev/stdout to a pipe: "pipe:[N]") is what it names.
    target.file = path;
    st = named;
  }
  if (!S_ISREG(st.st_mode)) {
    // Renaming over it would replace the node itself (for /dev/null, the device), and writing into it
    // in place would not be atomic; a FIFO could also block the run.
    const std::string shown =
        target.file == path ? path.string() : fmt::format("{} (a link to {})", path.string(), target.file.string());
    throw UserError(std::string(flag), fmt::format("cannot write {}: it is {}; outputs are regular files: name a "
                                                   "file or a new path",
                                                   shown, describeFileType(st.st_mode)));
  }
  target.existing = st;
  return target;
}

void keepOwnerAndMode(int fd, const struct stat& was) {
  // The owner first: changing it clears set-user-ID bits that fchmod then puts back. Only root may
  // give a file away, so EPERM leaves the file ours.
  if (::fchown(fd, was.st_uid, was.st_gid) != 0 && errno != EPERM)
    throw std::system_error(errno, std::generic_category());
  if (::fchmod(fd, was.st_mode & 07777) != 0) throw std::system_error(errno, std::generic_category());
}

void writeAll(int fd, std::span<const std::byte> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category());
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void writeFileAtomically(const fs::path& path, std::span<const std::byte> bytes) {
  const Target target = inspect(path, {});
  removeDeadTemporaries(target.file.parent_path());
  try {
    TemporaryFile tmp(target.file, target.existing ? 0600 : 0666);
    if (target.existing) keepOwnerAndMode(tmp.fd(), *target.existing);
    writeAll(tmp.fd(), bytes);
    if (::fsync(tmp.fd()) != 0) throw std::system_error(errno, std::generic_category());
    tmp.close();
    tmp.renameOver(target.file);
  } catch (const std::system_error& e) {
    cannotWrite(path, {}, e.code().value());
  }
}

void checkWritableTarget(const fs::path& path, std::string_view flag) {
  const Target target = inspect(path, flag);
  try {
    const TemporaryFile probe(target.file, 0600);
  } catch (const std::system_error& e) {
    cannotWrite(path, flag, e.code().value());
  }
}

void writeFileAtomically(const fs::path& path, std::string_view text) {
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

int openForReading(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fd;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
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
