#pragma once
// The ranks of a distributed run as Foundry uses them: who this process is, and the collective
// operations the context-parallel paths need. MpiCommunicator (Open MPI) is the real one; SingleRank
// is the one-process run, so the same code runs with and without MPI.
#include <cstdint>
#include <span>
#include <vector>

namespace foundry {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::uint32_t rank() const = 0;
  virtual std::uint32_t size() const = 0;
  /// The rank among the processes on this host: which of the host's devices this rank takes.
  virtual std::uint32_t localRank() const = 0;
  /// Every rank's `mine` (one length on every rank) in rank order, on rank 0; empty on the others.
  virtual std::vector<float> gather(std::span<const float> mine) = 0;
  /// Every rank's `mine` (one length on every rank) in rank order, on every rank.
  virtual std::vector<double> allGather(std::span<const double> mine) = 0;
  virtual void barrier() = 0;
};

/// A run of one process: rank 0 of 1.
class SingleRank : public Communicator {
 public:
  std::uint32_t rank() const override { return 0; }
  std::uint32_t size() const override { return 1; }
  std::uint32_t localRank() const override { return 0; }
  std::vector<float> gather(std::span<const float> mine) override { return {mine.begin(), mine.end()}; }
  std::vector<double> allGather(std::span<const double> mine) override { return {mine.begin(), mine.end()}; }
  void barrier() override {}
};

}  // namespace foundry
