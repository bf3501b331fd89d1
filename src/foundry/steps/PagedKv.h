#pragma once
// Paged KV caches (vLLM, FlashAttention's flash_attn_with_kvcache, FlashInfer): k and v are pools of
// pages, kv-cache [pages, n_kv_heads, page_size, head_dim] or token-major [pages, page_size,
// n_kv_heads, head_dim], and key s of sequence b is row s % page_size of page table[b][s / page_size].
// The kernels reach rows through KvAccessStage's block-table lookup; these are the checks made on the
// host before anything is recorded.
#include <cstdint>
#include <string>
#include <vector>

#include "foundry/Tensor.h"
#include "foundry/steps/ShapeRules.h"

namespace foundry {

struct PagedKv {
  Tensor blockTable;                 ///< u32 [batch, max_pages], contiguous in its last dim
  std::vector<std::uint32_t> table;  ///< its contents, row-major: what the checks read (as KeyLengthsStage's lengths)

  std::uint32_t batch() const { return blockTable.rank() == 2 ? static_cast<std::uint32_t>(blockTable.dim(0)) : 0; }
  std::uint32_t maxPages() const { return blockTable.rank() == 2 ? static_cast<std::uint32_t>(blockTable.dim(1)) : 0; }
  std::uint32_t rowStride() const { return blockTable.rank() == 2 ? static_cast<std::uint32_t>(blockTable.stride(0)) : 0; }
  std::uint32_t entry(std::uint32_t b, std::uint32_t i) const { return table.at(std::size_t(b) * maxPages() + i); }
};

/// A pool of `poolPages` pages of `pageSize` rows.
struct PagePool {
  std::uint32_t pages = 0;
  std::uint32_t pageSize = 0;
};


/// Checks the block table against `batch` sequences and the pool: a u32 [batch, max_pages] tensor
/// contiguous in its last dim with strides that fit 32 bits, a host copy of batch x max_pages entries,
/// and a page size that int8 blocks of 32 keys do not straddle. UserError naming "block_table".
void requireBlockTable(const PagedKv& pages, std::uint32_t batch, const PagePool& pool, DType format);

/// Checks that keys [first[b], end[b]) of each sequence b lie within its row of the block table and
/// that every entry they use names a page of the pool: UserError "a sequence length past its pages" or
/// "a block table entry past the pool", naming the sequence, the entry and the numbers. With `writes`,
/// two sequences may not write into one page. `end` is wide so that a position near 2^32 plus its
/// tokens cannot wrap into a short range.
void requirePagesCover(const PagedKv& pages, const PagePool& pool, const std::vector<std::uint32_t>& first,
                       const std::vector<std::uint64_t>& end, bool writes);

/// Host side (tests, benchmarks, programs that fill a cache from the CPU): where a packed cache holds
/// row s of KV head h of sequence b, in rows, for head-major host values [B, heads, capacity, D]. In
/// place [B, heads, capacity] or token-major [B, capacity, heads]; paged, in the page `table` names,
/// pages [pages, heads, pageSize] or token-major [pages, pageSize, heads].
struct PackedCacheRows {
  std::uint32_t heads = 0, capacity = 0;
  bool tokenMajor = false;
  std::uint32_t pageSize = 0, maxPages = 0;  ///< paged: rows per page, table entries per sequence
  std::vector<std::uint32_t> table;          ///< paged: [B][maxPages]

  std::size_t row(std::uint32_t b, std::uint32_t h, std::uint32_t s) const;
  /// Host values [B, heads, capacity, d] as a device tensor of `deviceRows` rows holds them, rows no
  /// host row maps to set to `fill`.
  std::vector<float> toDevice(const std::vector<float>& x, std::uint32_t d, std::size_t deviceRows, float fill) const;
  /// The inverse: `hostRows` rows of d values read back from a device tensor's values.
  std::vector<float> fromDevice(const std::vector<float>& x, std::uint32_t d, std::size_t hostRows) const;
};

}  // namespace foundry
