#include "foundry/stages/QuadLayout.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"

namespace foundry {

namespace {

std::string uintArray(const std::vector<std::uint32_t>& v) {
  std::string s = fmt::format("uint[{}](", v.size());
  for (std::size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}u", i ? ", " : "", v[i]);
  return s + ")";
}

}  // namespace

void declareQuadLayout(KernelInterface& k, const CoopMatLayout& layout, std::string_view prefix) {
  FOUNDRY_CHECK_INTERNAL(layout.quad(), "a register softmax planned for a device without the quad layout");
  std::vector<std::uint32_t> rows(layout.rowOf.begin(), layout.rowOf.end()), cols(layout.colOf.begin(), layout.colOf.end());
  std::vector<std::uint32_t> slotRows, slots;
  for (auto r : rows) {
    auto it = std::find(slotRows.begin(), slotRows.end(), r);
    if (it == slotRows.end()) it = slotRows.insert(slotRows.end(), r);
    slots.push_back(static_cast<std::uint32_t>(it - slotRows.begin()));
  }
  const auto n = static_cast<std::uint32_t>(rows.size());
  const auto name = [&](const char* what) { return fmt::format("{}_{}", prefix, what); };
  k.constant(name("ELEMS"), n).constant(name("SLOTS"), static_cast<std::uint32_t>(slotRows.size()));
  k.constant(name("ROW_OF"), fmt::format("uint[{}]", n), uintArray(rows));
  k.constant(name("COL_OF"), fmt::format("uint[{}]", n), uintArray(cols));
  k.constant(name("SLOT_OF"), fmt::format("uint[{}]", n), uintArray(slots));
  k.constant(name("SLOT_ROW"), fmt::format("uint[{}]", slotRows.size()), uintArray(slotRows));
}

}  // namespace foundry
