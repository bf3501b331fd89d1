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
  /// loads: 16-byte loads a lane issues before it folds them; blocked: each workgroup reads a
  /// contiguous share (else the grid strides over the whole buffer), cut into `split` parts, one per
  /// group of its invocations, each part cut into `sides` that every lane reads side by side.
  explicit ReadStreamStage(std::uint32_t loads = 1, bool blocked = false, std::uint32_t split = 1,
                           std::uint32_t sides = 1)
      : loads_(loads), blocked_(blocked), split_(split), sides_(sides) {}
  /// Each workgroup's contiguous share, each load's slot refilled once it is folded: `loads` in flight.
  struct Ring {};
  static Ring ring() { return {}; }
  ReadStreamStage(std::uint32_t loads, Ring) : loads_(loads), blocked_(true), ring_(true) {}
  std::string name() const override { return "ReadStreamStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override {
    return fmt::format("l{}{}{}{}", loads_, blocked_ ? "b" : "", ring_ ? "r" : "",
                       split_ * sides_ > 1 ? fmt::format("p{}s{}", split_, sides_) : "");
  }

 private:
  std::uint32_t loads_;
  bool blocked_, ring_ = false;
  std::uint32_t split_ = 1, sides_ = 1;
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
