#pragma once
// Kernels that measure the device's ceilings with the framework itself, for `foundry bench`:
//   ReadStreamStage: the read bandwidth of a GLSL load stream (bytes per second).
//   MmaLoopStage:    the f16 -> f32 cooperative-matrix product rate with operands in registers.
#include "foundry/Stage.h"

namespace foundry {

class ReadStreamStage : public Stage {
 public:
  std::string name() const override { return "ReadStreamStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return ""; }
};

class MmaLoopStage : public Stage {
 public:
  std::string name() const override { return "MmaLoopStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override { return ""; }
};

}  // namespace foundry
