#include "foundry/runner/MpiCommunicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw DeviceError(fmt::format("{} failed: {}", what, std::string(text, static_cast<std::size_t>(length))));
}

int countOf(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) {
    throw UnsupportedError(fmt::format("{} values in one MPI message; at most {}", n, INT_MAX));
  }
  return static_cast<int>(n);
}

/// Messages of at most 1 GiB: MPI counts are ints, and a K/V block of a long context is larger.
constexpr std::size_t kMessageBytes = std::size_t(1) << 30;
constexpr int kExchangeTag = 0x46;  // one exchange in flight per pair of ranks at a time

/// The requests of one exchange, each message cut into pieces of at most kMessageBytes (sent and
/// received in order, one tag: MPI keeps the order of messages between two ranks on one tag).
class MpiTransfer : public Transfer {
 public:
  MpiTransfer(std::span<const std::byte> send, std::optional<std::uint32_t> to, std::span<std::byte> receive,
              std::optional<std::uint32_t> from) {
    if (from) {
      for (std::size_t at = 0; at < receive.size(); at += kMessageBytes) {
        const std::size_t n = std::min(kMessageBytes, receive.size() - at);
        requests_.emplace_back();
        check(MPI_Irecv(receive.data() + at, static_cast<int>(n), MPI_BYTE, static_cast<int>(*from), kExchangeTag,
                        MPI_COMM_WORLD, &requests_.back()),
              "MPI_Irecv");
      }
    }
    if (to) {
      for (std::size_t at = 0; at < send.size(); at += kMessageBytes) {
        const std::size_t n = std::min(kMessageBytes, send.size() - at);
        requests_.emplace_back();
        check(MPI_Isend(send.data() + at, static_cast<int>(n), MPI_BYTE, static_cast<int>(*to), kExchangeTag,
                        MPI_COMM_WORLD, &requests_.back()),
              "MPI_Isend");
      }
    }
  }
  ~MpiTransfer() override {
    // An exception left requests in flight: complete them, so no buffer is written after it is freed.
    if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override {
    if (requests_.empty()) return;
    const int rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    check(rc, "MPI_Waitall");
  }
  bool test() override {
    if (requests_.empty()) return true;
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) requests_.clear();
    check(rc, "MPI_Testall");
    if (done) requests_.clear();
    return done != 0;
  }

 private:
  std::vector<MPI_Request> requests_;
};

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int ready = 0;
  check(MPI_Initialized(&ready), "MPI_Initialized");
  if (!ready) {
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
    initialised_ = true;
  }
  // Errors come back as codes (and become exceptions) instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int r = 0, s = 1, local = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &s), "MPI_Comm_size");
  MPI_Comm host;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
  check(MPI_Comm_rank(host, &local), "MPI_Comm_rank");
  MPI_Comm_free(&host);
  rank_ = static_cast<std::uint32_t>(r);
  size_ = static_cast<std::uint32_t>(s);
  localRank_ = static_cast<std::uint32_t>(local);
}

MpiCommunicator::~MpiCommunicator() {
  if (initialised_) MPI_Finalize();
}

void MpiCommunicator::gather(std::span<const std::byte> mine, std::span<std::byte> all) {
  if (rank_ == 0 && all.size() != mine.size() * size_) {
    throw InternalError(fmt::format("gather of {} bytes from {} ranks into {}", mine.size(), size_, all.size()));
  }
  check(MPI_Gather(mine.data(), countOf(mine.size()), MPI_BYTE, rank_ == 0 ? all.data() : nullptr,
                   countOf(mine.size()), MPI_BYTE, 0, MPI_COMM_WORLD),
        "MPI_Gather");
}

std::vector<double> MpiCommunicator::allGather(std::span<const double> mine) {
  std::vector<double> all(mine.size() * size_);
  check(MPI_Allgather(mine.data(), countOf(mine.size()), MPI_DOUBLE, all.data(), countOf(mine.size()), MPI_DOUBLE,
                      MPI_COMM_WORLD),
        "MPI_Allgather");
  return all;
}

std::unique_ptr<Transfer> MpiCommunicator::exchange(std::span<const std::byte> send, std::optional<std::uint32_t> to,
                                                    std::span<std::byte> receive, std::optional<std::uint32_t> from) {
  return std::make_unique<MpiTransfer>(send, to, receive, from);
}

void MpiCommunicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; this is for the compiler
}

void MpiCommunicator::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

}  // namespace foundry
