#pragma once
// Base element offsets of q and out for the workgroup's (batch, heads), from strides passed as push
// constants, and the KV head that GQA/MQA maps the query heads to (its rows: KvAccessStage). Works for
// head-major and token-major Q/O.
#include "foundry/Stage.h"

namespace foundry {

class HeadLayoutStage : public Stage {
 public:
  enum class Grid {
    /// (split, query-head group, batch): `headsPerGroup` query heads that share one KV head.
    Decode,
    /// (query-tile slot, query head, batch): each head's tiles in turn.
    Prefill,
    /// (query head, query-tile slot, batch): one slot of every head, then the next slot.
    PrefillHeadsFirst,
  };
  HeadLayoutStage(Grid grid, std::uint32_t headsPerWorkgroup) : grid_(grid), heads_(headsPerWorkgroup) {}

  std::string name() const override { return "HeadLayoutStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter& w, const DeviceInfo& device) const override;
  std::string key() const override;

  /// Push-constant fields every attention kernel shares: shape and the strides of q, k, v, out.
  static void declareShapeFields(KernelInterface& k);
  /// Marks them as read by a stage that follows HeadLayoutStage in its kernel.
  static void usesShapeFields(KernelInterface& k);
  /// The widths of the cache rows: K rows of head_dim elements, V rows of value_dim (where the rows
  /// are, KvAccessStage says). Declares HEAD_DIM and VALUE_DIM.
  static void declareRows(KernelInterface& k, std::uint32_t headDim, std::uint32_t valueDim);
  /// Their part of a kernel key: "D128", or "D192v128" where V differs.
  static std::string rowsKey(std::uint32_t headDim, std::uint32_t valueDim);

 private:
  Grid grid_;
  std::uint32_t heads_;
};

}  // namespace foundry
