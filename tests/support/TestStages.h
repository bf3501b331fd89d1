#pragma once
// Three small stages used to test the builder and the runtime end to end:
// load (global -> shared) -> scale (a neighbour in shared memory times a push constant) -> store.
#include "foundry/DeviceInfo.h"
#include "foundry/Stage.h"

namespace foundry::test {

class LoadStage : public Stage {
 public:
  LoadStage(DType dtype, std::uint32_t tile) : dtype_(dtype), tile_(tile) {}
  std::string name() const override { return "LoadStage"; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.buffer("src", dtype_, Access::ReadOnly).push("count", PushType::U32).shared("tile", "float", tile_, 4);
    k.produces("gid", "uint").snippet("common/finite.glsl");
  }
  void emit(GlslWriter& w, const DeviceInfo&) const override {
    w.line("const uint gid = gl_GlobalInvocationID.x;");
    w.line("tile[gl_LocalInvocationID.x] = gid < pc.count ? float(src[gid]) : 0.0;");
    w.line("barrier();");
  }
  std::string key() const override { return fmt::format("{}_t{}", dtypeName(dtype_), tile_); }

 private:
  DType dtype_;
  std::uint32_t tile_;
};

class ScaleStage : public Stage {
 public:
  explicit ScaleStage(std::uint32_t tile) : tile_(tile) {}
  std::string name() const override { return "ScaleStage"; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.push("scale", PushType::F32).consumes("tile", fmt::format("shared float[{}]", tile_)).produces("scaled", "float");
  }
  void emit(GlslWriter& w, const DeviceInfo&) const override {
    // Reads a neighbour's element so the result depends on shared memory, not only on registers.
    w.line("const float scaled = tile[(gl_LocalInvocationID.x + 1u) % WORKGROUP_SIZE] * pc.scale;");
  }
  std::string key() const override { return ""; }

 private:
  std::uint32_t tile_;
};

class StoreStage : public Stage {
 public:
  explicit StoreStage(DType dtype) : dtype_(dtype) {}
  std::string name() const override { return "StoreStage"; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.buffer("dst", dtype_, Access::WriteOnly).push("count", PushType::U32);
    k.consumes("gid", "uint").consumes("scaled", "float");
  }
  void emit(GlslWriter& w, const DeviceInfo&) const override {
    w.open("if (gid < pc.count)");
    w.line("dst[gid] = {}(scaled);", glslScalarType(dtype_));
    w.close();
  }
  std::string key() const override { return std::string(dtypeName(dtype_)); }

 private:
  DType dtype_;
};

/// A stage whose declarations are given in the constructor, for contract tests.
class ScriptedStage : public Stage {
 public:
  using Declare = std::function<void(KernelInterface&)>;
  ScriptedStage(std::string name, Declare declare, std::string body = {})
      : name_(std::move(name)), declare_(std::move(declare)), body_(std::move(body)) {}
  std::string name() const override { return name_; }
  void declare(KernelInterface& k, const DeviceInfo&) const override { declare_(k); }
  void emit(GlslWriter& w, const DeviceInfo&) const override {
    if (!body_.empty()) w.line(body_);
  }
  std::string key() const override { return ""; }

 private:
  std::string name_;
  Declare declare_;
  std::string body_;
};

}  // namespace foundry::test
