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
/// two sequences may not write into one page.
void requirePagesCover(const PagedKv& pages, const PagePool& pool, const std::vector<std::uint32_t>& first,
                       const std::vector<std::uint32_t>& end, bool writes);

}  // namespace foundry
