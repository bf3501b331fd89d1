#include "foundry/steps/PagedKv.h"

#include <algorithm>
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
  if (const std::string why = pageSizeProblem(pool.pageSize, format); !why.empty()) throw UserError("block_table", why);
}

void requirePagesCover(const PagedKv& pages, const PagePool& pool, const std::vector<std::uint32_t>& first,
                       const std::vector<std::uint64_t>& end, bool writes) {
  const std::uint64_t rows = std::uint64_t(pages.maxPages()) * pool.pageSize;
  std::map<std::uint32_t, std::uint32_t> writer;  // page -> the sequence writing it
  for (std::uint32_t b = 0; b < end.size(); ++b) {
    if (end[b] > rows) {
      throw UserError("block_table", fmt::format("sequence {} needs {} keys but its row of the block table holds {} "
                                                 "pages of {} tokens ({} keys): a sequence length past its pages", b,
                                                 end[b], pages.maxPages(), pool.pageSize, rows));
    }
    if (end[b] <= first[b]) continue;
    const auto last = static_cast<std::uint32_t>((end[b] - 1) / pool.pageSize);
    for (std::uint32_t i = first[b] / pool.pageSize; i <= last; ++i) {
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

std::size_t PackedCacheRows::row(std::uint32_t b, std::uint32_t h, std::uint32_t s) const {
  const std::size_t seq = pageSize ? table.at(std::size_t(b) * maxPages + s / pageSize) : b;
  const std::size_t slot = pageSize ? s % pageSize : s, rows = pageSize ? pageSize : capacity;
  return tokenMajor ? (seq * rows + slot) * heads + h : (seq * heads + h) * rows + slot;
}

std::vector<float> PackedCacheRows::toDevice(const std::vector<float>& x, std::uint32_t d, std::size_t deviceRows,
                                             float fill) const {
  std::vector<float> out(deviceRows * d, fill);
  for (std::size_t i = 0; i < x.size() / d; ++i) {
    const auto b = static_cast<std::uint32_t>(i / (std::size_t(heads) * capacity));
    const auto h = static_cast<std::uint32_t>(i / capacity % heads), s = static_cast<std::uint32_t>(i % capacity);
    std::copy_n(x.begin() + i * d, d, out.begin() + row(b, h, s) * d);
  }
  return out;
}

std::vector<float> PackedCacheRows::fromDevice(const std::vector<float>& x, std::uint32_t d, std::size_t hostRows) const {
  std::vector<float> out(hostRows * d);
  for (std::size_t i = 0; i < hostRows; ++i) {
    const auto b = static_cast<std::uint32_t>(i / (std::size_t(heads) * capacity));
    const auto h = static_cast<std::uint32_t>(i / capacity % heads), s = static_cast<std::uint32_t>(i % capacity);
    std::copy_n(x.begin() + row(b, h, s) * d, d, out.begin() + i * d);
  }
  return out;
}

}  // namespace foundry
