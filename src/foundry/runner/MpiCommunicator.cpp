#include "foundry/runner/MpiCommunicator.h"

#include <mpi.h>

#include <climits>

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

std::vector<float> MpiCommunicator::gather(std::span<const float> mine) {
  std::vector<float> all(rank_ == 0 ? mine.size() * size_ : 0);
  check(MPI_Gather(mine.data(), countOf(mine.size()), MPI_FLOAT, all.data(), countOf(mine.size()), MPI_FLOAT, 0,
                   MPI_COMM_WORLD),
        "MPI_Gather");
  return all;
}

std::vector<double> MpiCommunicator::allGather(std::span<const double> mine) {
  std::vector<double> all(mine.size() * size_);
  check(MPI_Allgather(mine.data(), countOf(mine.size()), MPI_DOUBLE, all.data(), countOf(mine.size()), MPI_DOUBLE,
                      MPI_COMM_WORLD),
        "MPI_Allgather");
  return all;
}

void MpiCommunicator::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

}  // namespace foundry
