#pragma once
// The one place that knows where a KV cache row is and how its elements are stored. Every kernel that
// touches k_cache or v_cache has this stage in its chain and reaches rows through it:
//
//   uint kv_k_row(uint b, uint h, uint key)   element offset of row `key` of KV head h of sequence b
//   uint kv_v_row(uint b, uint h, uint key)   (rows k_stride_s / v_stride_s apart: head-major caches
//                                             [B, Hkv, S, D], token-major ones [B, S, Hkv, D] read in
//                                             place, and views of wider rows such as MLA's latent)
//   KV_RAW kv_load_k(uint at)                 `width` elements from element offset `at` (a multiple
//   KV_RAW kv_load_v(uint at)                 of the width), in their stored form (f32 for width 1)
//   KV_UNPACK(r, p)                           chunk p (min(width, 4) elements) of a load, as f32
//   void kv_store_k(uint at, float x)         with write access (width 1): one element, converted
//   void kv_store_v(uint at, float x)
//
// The format (f16, bf16, f32) comes from foundry/StorageFormat.h.
#include "foundry/Stage.h"

namespace foundry {

struct KvAccess {
  DType format = DType::F16;  ///< of K and of V
  std::uint32_t width = 1;    ///< elements per load: the buffers' view
  bool write = false;         ///< the kernel writes rows (appends) instead of reading them
  std::string key() const;
};

class KvAccessStage : public Stage {
 public:
  explicit KvAccessStage(KvAccess access) : a_(access) {}

  std::string name() const override { return "KvAccessStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter&, const DeviceInfo&) const override {}
  std::string key() const override { return a_.key(); }

  /// The stride push constants the stage declares, in the order a Step sets them.
  static const char* const kStrideFields[6];

 private:
  KvAccess a_;
};

}  // namespace foundry
