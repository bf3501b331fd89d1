#pragma once
// A modifier is a Stage that plugs into an attention kernel's hook points (foundry/stages/AttentionHooks.h)
// instead of adding code to main(): a causal mask, a sliding window, ALiBi, a soft-cap, sinks,
// per-sequence lengths, a mask tensor, or a user's own. Besides its GLSL it has a host side: the
// tensors and push constants it binds, optional passes recorded before the attention kernel (a mask's
// block map), and a float64 implementation of each hook that the CPU reference runs, written
// independently of the GLSL. Positions follow the kernels: query i of sequence b sits at key position
// kvLength(b) - q_len + i.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foundry/Dispatcher.h"
#include "foundry/Stage.h"
#include "foundry/Workspace.h"

namespace foundry {

/// What a modifier sees of one attention call.
struct ModifierCall {
  std::uint32_t batch = 1;
  std::uint32_t nHeads = 1;
  std::uint32_t nKvHeads = 1;
  std::uint32_t qLen = 1;
  std::uint32_t kvLen = 1;  ///< the call's key count (the longest sequence's, with per-sequence lengths)
  std::uint32_t headDim = 1;
};

/// The query rows and keys of one tile of the kernel that runs the call (0 x 0: a kernel without
/// tiles, such as decode).
struct TileShape {
  std::uint32_t queryRows = 0;
  std::uint32_t keys = 0;
  bool tiled() const { return queryRows > 0 && keys > 0; }
  bool operator==(const TileShape&) const = default;
};

/// Where a hook is evaluated: batch b, query head h, query position q, key k. `offset` is the
/// position of the first query of the call in sequence b (kvLength(b) - q_len), so the query's
/// index in the call is q - offset.
struct HookAt {
  std::uint32_t b = 0, h = 0, q = 0, k = 0, offset = 0;
  std::uint32_t queryIndex() const { return q - offset; }
};

/// A block of query positions [qLo, qHi] of (b, h), offset as in HookAt.
struct HookBlock {
  std::uint32_t b = 0, h = 0, qLo = 0, qHi = 0, offset = 0;
};

/// Keys outside [anyLo, anyHi) are invisible to every query of a block; keys inside [allLo, allHi)
/// are visible to all of them. The default says nothing.
struct KeyRange {
  static constexpr std::uint32_t kEnd = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t anyLo = 0, anyHi = kEnd, allLo = 0, allHi = kEnd;
  KeyRange meet(const KeyRange& o) const;
  /// Clipped to the keys [0, n).
  KeyRange within(std::uint32_t n) const { return meet({0, n, 0, n}); }
  std::uint32_t width() const { return anyHi > anyLo ? anyHi - anyLo : 0; }
};

/// A kernel a modifier records before the attention kernel.
struct ModifierPass {
  StagePtr stage;
  std::uint32_t workgroup = 64;
  Grid grid;
  Arguments args;
};

class AttentionModifier : public Stage {
 public:
  /// Modifiers add nothing to main(): their code is the functions their hooks name.
  void emit(GlslWriter&, const DeviceInfo&) const override {}

  /// One line for reports: "sliding window (left 4095, right 0)".
  virtual std::string describe() const;
  /// Checks the modifier against a call (tensor sizes, lengths); a UserError names the field.
  virtual void validate(const ModifierCall&) const {}
  /// Binds the tensors and sets the push constants declare() named, for a kernel with `tile`.
  virtual void bind(Arguments&, const ModifierCall&, Workspace&, TileShape) const {}
  /// Kernels to record before the attention kernels of a call (default none).
  virtual std::vector<ModifierPass> passes(const ModifierCall&, Workspace&, TileShape) const { return {}; }
  /// Whether the modifier changes nothing for this call (a bottom-right causal mask for one query):
  /// kernels are then built without it.
  virtual bool isIdentityFor(const ModifierCall&) const { return false; }
  /// The most loop passes one call of this modifier's GLSL hooks spends on a device that ends a shader
  /// invocation's loops after so many passes in all (DeviceInfo::loopLimit: llvmpipe): each run of a loop
  /// of n trips counts n + 2, a loop with constant trips under [[unroll]] none. The Selector splits the
  /// keys so that the kernel, with its hooks called this much a key, stays within the limit; a hook
  /// whose loops this leaves out can have the device drop keys silently. 0: no loops (the default).
  virtual std::uint32_t loopPassesPerCall(const ModifierCall&) const { return 0; }

  // The float64 reference of each hook; the defaults leave everything unchanged.
  virtual std::optional<std::uint32_t> kvLength(std::uint32_t /*b*/) const { return std::nullopt; }
  /// The slope of a logit bias linear in the key's distance from the query: every logit gains
  /// slope * (k - q) before any score hook runs (ALiBi). Kernels apply it in their own units with one
  /// fused multiply-add per score, which a score hook cannot get.
  virtual double distanceBias(std::uint32_t /*b*/, std::uint32_t /*h*/) const { return 0.0; }
  virtual double score(double s, const HookAt& /*at*/) const { return s; }
  virtual bool visible(const HookAt& /*at*/) const { return true; }
  /// The keys of a query block; also what the Selector sizes splits by.
  virtual KeyRange keyRange(const HookBlock& /*block*/) const { return {}; }
  /// Whether keyRange depends on the head (the Selector then asks for every head).
  virtual bool rangeDependsOnHead() const { return false; }
  virtual std::optional<double> sink(std::uint32_t /*b*/, std::uint32_t /*h*/) const { return std::nullopt; }
  virtual double epilogue(double o, std::uint32_t /*b*/, std::uint32_t /*h*/, std::uint32_t /*q*/, std::uint32_t /*d*/) const {
    return o;
  }
};

using ModifierPtr = std::shared_ptr<const AttentionModifier>;
using Modifiers = std::vector<ModifierPtr>;

/// The composed host side of a list of modifiers, as the kernels compose their hooks.
struct ModifierChain {
  const Modifiers& list;
  std::uint32_t kvLength(std::uint32_t b, std::uint32_t callKvLen) const;
  double score(double s, const HookAt& at) const;
  bool visible(const HookAt& at) const;
  KeyRange keyRange(const HookBlock& block) const;
  std::optional<double> sink(std::uint32_t b, std::uint32_t h) const;
  double epilogue(double o, std::uint32_t b, std::uint32_t h, std::uint32_t q, std::uint32_t d) const;
  bool rangeDependsOnHead() const;
};

}  // namespace foundry
