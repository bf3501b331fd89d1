#pragma once
// Ranks on MPI (Open MPI from Debian's packages): MPI_COMM_WORLD, the host-local rank from an
// MPI_COMM_TYPE_SHARED split. Initialises MPI if nobody has and finalises what it initialised.
#include "foundry/runner/Communicator.h"

namespace foundry {

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator();
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::uint32_t rank() const override { return rank_; }
  std::uint32_t size() const override { return size_; }
  std::uint32_t localRank() const override { return localRank_; }
  void gather(std::span<const std::byte> mine, std::span<std::byte> all) override;
  std::vector<double> allGather(std::span<const double> mine) override;
  void barrier() override;
  [[noreturn]] void abort(int code) override;
  std::unique_ptr<Transfer> exchange(std::span<const std::byte> send, std::optional<std::uint32_t> to,
                                     std::span<std::byte> receive, std::optional<std::uint32_t> from) override;

 private:
  bool initialised_ = false;  ///< by this object: it finalises
  std::uint32_t rank_ = 0, size_ = 1, localRank_ = 0;
};

}  // namespace foundry
