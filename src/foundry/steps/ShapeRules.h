#pragma once
// Rules on an attention layout's numbers that the config loader, the command line and the steps all
// apply, each in one place. Each returns why the numbers cannot be used, or empty where they can; the
// caller names the field. Only fmt and the storage formats behind them (the fuzzed parsers link them).
#include <cstdint>
#include <string>
#include <string_view>

#include "foundry/DType.h"

namespace foundry {

/// Why `heads` query heads cannot share `kvHeads` KV heads in whole groups, calling them `headsName`
/// and `kvName` (a config's fields, or flags); empty where they can. The one rule behind a config's
/// n_kv_heads, an attention call's and the command line's head counts.
std::string headGroupProblem(std::uint32_t heads, std::uint32_t kvHeads, std::string_view headsName,
                             std::string_view kvName);

/// Why pages of `pageSize` rows cannot hold a `format` cache (they would cut its blocks of keys: int8's
/// 32); empty where they can, and for 0 (no pages). The one rule behind a block table's pool, a config's
/// page_size and `foundry bench --shape`'s pg<N>.
std::string pageSizeProblem(std::uint32_t pageSize, DType format);

}  // namespace foundry
