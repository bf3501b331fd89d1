#pragma once
// The ranks of a distributed run as Foundry uses them: who this process is, and the collective
// operations the context-parallel paths need. MpiCommunicator (Open MPI) is the real one; SingleRank
// is the one-process run, so the same code runs with and without MPI.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "foundry/Error.h"

namespace foundry {

/// A point-to-point exchange in flight (Communicator::exchange): its buffers must outlive it.
class Transfer {
 public:
  virtual ~Transfer() = default;
  /// Blocks until the send has left its buffer and the receive has filled its own.
  virtual void wait() = 0;
  /// Moves the transfer on without blocking (MPI progresses a large message only inside its calls);
  /// true once it is done.
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::uint32_t rank() const = 0;
  virtual std::uint32_t size() const = 0;
  /// The rank among the processes on this host: which of the host's devices this rank takes.
  virtual std::uint32_t localRank() const = 0;
  /// Every rank's `mine` (one length on every rank) in rank order, into rank 0's `all` (size() times
  /// as long); `all` is not touched on the other ranks.
  virtual void gather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  /// Every rank's `mine` (one length on every rank) in rank order, on every rank.
  virtual std::vector<double> allGather(std::span<const double> mine) = 0;
  virtual void barrier() = 0;
  /// Ends every rank's process with `code` (a rank that failed while the others may wait for it in a
  /// collective); does not return.
  [[noreturn]] virtual void abort(int code) = 0;
  /// Starts sending `send` to rank `to` and receiving `receive` (its exact size) from rank `from`;
  /// either may be absent. The ring paths overlap the transfer of the next block with the attention
  /// of this one.
  virtual std::unique_ptr<Transfer> exchange(std::span<const std::byte> send, std::optional<std::uint32_t> to,
                                             std::span<std::byte> receive, std::optional<std::uint32_t> from) = 0;
};

/// A transfer with nothing in flight.
class DoneTransfer : public Transfer {
 public:
  void wait() override {}
  bool test() override { return true; }
};

/// A run of one process: rank 0 of 1.
class SingleRank : public Communicator {
 public:
  std::uint32_t rank() const override { return 0; }
  std::uint32_t size() const override { return 1; }
  std::uint32_t localRank() const override { return 0; }
  void gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    std::copy(mine.begin(), mine.end(), all.begin());
  }
  std::vector<double> allGather(std::span<const double> mine) override { return {mine.begin(), mine.end()}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
  /// One rank has no peer: only an exchange with nobody.
  std::unique_ptr<Transfer> exchange(std::span<const std::byte>, std::optional<std::uint32_t> to,
                                     std::span<std::byte>, std::optional<std::uint32_t> from) override {
    if (to || from) throw InternalError("an exchange with another rank in a run of one rank");
    return std::make_unique<DoneTransfer>();
  }
};

}  // namespace foundry
