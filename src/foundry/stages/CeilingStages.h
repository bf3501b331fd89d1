#pragma once
// Kernels that measure the device's ceilings with the framework itself, for `foundry bench`:
//   ReadStreamStage: the read bandwidth of a GLSL load stream (bytes per second).
//   MmaLoopStage:    the f16 -> f32 cooperative-matrix product rate with operands in registers.
#include <cstdint>

#include <fmt/format.h>

#include "foundry/Stage.h"

namespace foundry {

class ReadStreamStage : public Stage {
 public:
  /// grid: the grid strides over the whole buffer; blocked: each workgroup reads a contiguous share,
  /// cut into `split` parts, one per group of its invocations, each part cut into `sides` that every
  /// lane reads side by side; ring: that share whole, each load's slot refilled once it is folded.
  enum class Order { Grid, Blocked, Ring };
  /// loads: 16-byte loads a lane issues before it folds them (ring: keeps in flight).
  explicit ReadStreamStage(std::uint32_t loads = 1, Order order = Order::Grid, std::uint32_t split = 1,
                           std::uint32_t sides = 1)
      : loads_(loads), order_(order), split_(split), sides_(sides) {}
  std::string name() const override { return "ReadStreamStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override {
    return fmt::format("l{}{}{}", loads_,
                       order_ == Order::Blocked ? "b"
                       : order_ == Order::Ring  ? "br"
                                                : "",
                       split_ * sides_ > 1 ? fmt::format("p{}s{}", split_, sides_) : "");
  }

 private:
  std::uint32_t loads_;
  Order order_;
  std::uint32_t split_, sides_;
};

/// Workgroup-scope coopmat2 tensor loads of each workgroup's contiguous share (rows of 128 f16, tiles
/// of 64 rows, `loads` tiles loaded before they are folded): how fast the driver's own loads stream.
class CoopMat2ReadStage : public Stage {
 public:
  explicit CoopMat2ReadStage(std::uint32_t loads) : loads_(loads) {}
  std::string name() const override { return "CoopMat2ReadStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return fmt::format("l{}", loads_); }

 private:
  std::uint32_t loads_;
};

class MmaLoopStage : public Stage {
 public:
  std::string name() const override { return "MmaLoopStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return ""; }
};

}  // namespace foundry
