#include "foundry/steps/PagedKv.h"

#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

void requireBlockTable(const PagedKv& pages, std::uint32_t batch, const PagePool& pool, DType format) {
  const Tensor& t = pages.blockTable;
  const bool shaped = t.rank() == 2 && t.dtype == DType::U32 && t.lastDimContiguous() && t.dim(0) == batch &&
                      t.dim(1) > 0 && t.stride(0) >= t.dim(1) && t.stride(0) <= std::numeric_limits<std::uint32_t>::max();
  if (!shaped) {
    throw UserError("block_table", fmt::format("'{}' is {}; a block table is u32 [batch {}, max_pages] with a last "
                                               "stride of 1 and rows that do not overlap", t.name, t.shapeString(), batch));
  }
  if (pages.table.size() != std::size_t(batch) * pages.maxPages()) {
    throw UserError("block_table", fmt::format("the host copy of '{}' holds {} entries; [{}, {}] needs {}", t.name,
                                               pages.table.size(), batch, pages.maxPages(),
                                               std::size_t(batch) * pages.maxPages()));
  }
  if (pool.pageSize == 0 || pool.pages == 0) {
    throw UserError("block_table", fmt::format("the page pool has {} pages of {} rows; both must be at least 1",
                                               pool.pages, pool.pageSize));
  }
  const QuantBlocks& q = storageFormat(format).blocks;
  if (q.keys > 1 && pool.pageSize % q.keys != 0) {
    throw UserError("block_table", fmt::format("pages of {} rows cut {} blocks of {} keys; accepted: a page size that "
                                               "is a multiple of {}", pool.pageSize, dtypeName(format), q.keys, q.keys));
  }
}

void requirePagesCover(const PagedKv& pages, const PagePool& pool, const std::vector<std::uint32_t>& first,
                       const std::vector<std::uint32_t>& end, bool writes) {
  const std::uint64_t rows = std::uint64_t(pages.maxPages()) * pool.pageSize;
  std::map<std::uint32_t, std::uint32_t> writer;  // page -> the sequence writing it
  for (std::uint32_t b = 0; b < end.size(); ++b) {
    if (end[b] > rows) {
      throw UserError("block_table", fmt::format("sequence {} needs {} keys but its row of the block table holds {} "
                                                 "pages of {} tokens ({} keys): a sequence length past its pages", b,
                                                 end[b], pages.maxPages(), pool.pageSize, rows));
    }
    if (end[b] <= first[b]) continue;
    for (std::uint32_t i = first[b] / pool.pageSize; i <= (end[b] - 1) / pool.pageSize; ++i) {
      const std::uint32_t page = pages.entry(b, i);
      if (page >= pool.pages) {
        throw UserError("block_table", fmt::format("entry [{}][{}] is {}, past the pool of {} pages (keys {}..{} of "
                                                   "sequence {} live there)", b, i, page, pool.pages,
                                                   i * pool.pageSize, std::min<std::uint64_t>(end[b], (i + 1ull) * pool.pageSize) - 1, b));
      }
      if (!writes) continue;
      const auto [it, fresh] = writer.emplace(page, b);
      if (!fresh && it->second != b) {
        throw UserError("block_table", fmt::format("sequences {} and {} both write page {} (entries [{}][..] and "
                                                   "[{}][{}]); appends need a page per sequence", it->second, b, page,
                                                   it->second, b, i));
      }
    }
  }
}

}  // namespace foundry
