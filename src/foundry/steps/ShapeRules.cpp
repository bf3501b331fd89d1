#include "foundry/steps/ShapeRules.h"

#include <fmt/format.h>

#include "foundry/StorageFormat.h"

namespace foundry {

std::string headGroupProblem(std::uint32_t heads, std::uint32_t kvHeads, std::string_view headsName,
                             std::string_view kvName) {
  if (kvHeads != 0 && kvHeads <= heads && heads % kvHeads == 0) return "";
  return fmt::format("{} ({}) must be a multiple of {} ({}): each KV head serves a whole group of query heads",
                     headsName, heads, kvName, kvHeads);
}

std::string pageSizeProblem(std::uint32_t pageSize, DType format) {
  const QuantBlocks& q = storageFormat(format).blocks;
  if (q.keys <= 1 || pageSize % q.keys == 0) return "";
  return fmt::format("pages of {} rows would cut {} blocks of {} keys; accepted: a page size that is a multiple of {}",
                     pageSize, dtypeName(format), q.keys, q.keys);
}

}  // namespace foundry
