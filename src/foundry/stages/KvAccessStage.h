#pragma once
// The one place that knows where a KV cache row is and how its elements are stored. Every kernel that
// touches k_cache or v_cache has this stage in its chain and reaches rows through it:
//
//   KV_ROW kv_k_row(uint b, uint h, uint key)  row `key` of KV head h of sequence b (rows k_stride_s /
//   KV_ROW kv_v_row(uint b, uint h, uint key)  v_stride_s apart: head-major caches [B, Hkv, S, D],
//                                              token-major ones [B, S, Hkv, D] read in place, and views
//                                              of wider rows such as MLA's latent; paged: row key %
//                                              page_size of page block_table[b][key / page_size], the
//                                              batch stride stepping over pages). A uint element
//                                              offset; int8: also the offset of the row's scales
//   uint kv_seq(uint b, uint key)              what the batch stride steps over for that key: b, or
//                                              paged, its page (the block-table lookup)
//   KV_ROW kv_k_row_in(uint seq, uint h, uint key)  the row from a kv_seq already looked up, so that
//   KV_ROW kv_v_row_in(uint seq, uint h, uint key)  keys of one page take one lookup
//   KV_RAW kv_load_k(KV_ROW row, uint d)       `width` elements from dimension d (a multiple of the
//   KV_RAW kv_load_v(KV_ROW row, uint d)       width), in their stored form (f32 for width 1)
//   KV_UNPACK(r, p)                            chunk p (min(width, 4) elements) of a load, as f32
//   KV_CODES(r, p) * KV_SCALE(r)               the same, apart: a quantized load's codes (as f32) and
//                                              the one scale they share (1.0 for float formats)
//   KV_CODE_WORD(r, p)                         quantized loads of 4 or more codes: word p of the
//                                              codes as stored (signed bytes, the lowest first)
//
// With words (16-bit float formats, loads of 4 or 8): chunks are single words of 2 elements, and
//   uint kv_load_k_word(KV_ROW row, uint d)    one word (elements d, d + 1) on its own, for rows whose
//   uint kv_load_v_word(KV_ROW row, uint d)    lanes take whole loads and then a word each
//   KV_WORD_UNPACK(w)                          such a word as f32 (vec2)
//
// With write access (width 1), for KvAppendStep:
//   void kv_store_k(KV_ROW row, uint d, float x)         float formats: one element, converted
//   float kv_k_scale(KV_ROW row, uint d)                 quantized formats: the scale of d's block,
//   void kv_store_k_scale(KV_ROW row, uint d, float s)   s already an f16 value
//   void kv_store_k_codes(KV_ROW row, uint d, uint w)    four codes (bytes of w) at dimensions d..d+3
//   (and the same for v), and kv_load_k/v of one dequantized element.
//
// The format (f16, bf16, f32; int8 with f16 scales per block, q8_0 blocks) comes from
// foundry/StorageFormat.h; quantized loads carry their block's scale and are dequantized by
// KV_UNPACK in registers.
#include "foundry/Stage.h"

namespace foundry {

struct KvAccess {
  DType format = DType::F16;  ///< of K and of V
  std::uint32_t width = 1;    ///< elements per load: the buffers' view
  bool write = false;         ///< the kernel writes rows (appends) instead of reading them
  std::uint32_t pageSize = 0; ///< rows per page of a paged pool (block_table, block_table_stride); 0: not paged
  /// k_cache alone (no v_cache, no kv_*_v functions): appends to latent rows, whose values are a view
  /// of the keys and so may not be bound as a second, overlapping cache.
  bool keysOnly = false;
  /// 16-bit float formats in loads of 4 or 8: chunks of one word (2 elements), and single words
  /// loadable beside whole loads (kv_load_k_word).
  bool words = false;
  std::string key() const;
};

class KvAccessStage : public Stage {
 public:
  explicit KvAccessStage(KvAccess access) : a_(access) {}

  std::string name() const override { return "KvAccessStage"; }
  void declare(KernelInterface& k, const DeviceInfo& device) const override;
  void emit(GlslWriter&, const DeviceInfo&) const override {}
  std::string key() const override { return a_.key(); }


 private:
  KvAccess a_;
};

}  // namespace foundry
