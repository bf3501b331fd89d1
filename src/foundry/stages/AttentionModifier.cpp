#include "foundry/stages/AttentionModifier.h"

#include <algorithm>

#include <fmt/format.h>

namespace foundry {

std::string AttentionModifier::describe() const {
  const std::string k = key();
  return k.empty() ? name() : fmt::format("{} {}", name(), k);
}

KeyRange KeyRange::meet(const KeyRange& o) const {
  KeyRange r{std::max(anyLo, o.anyLo), std::min(anyHi, o.anyHi), std::max(allLo, o.allLo), std::min(allHi, o.allHi)};
  r.anyHi = std::max(r.anyHi, r.anyLo);
  r.allHi = std::max(r.allHi, r.allLo);
  return r;
}

std::uint32_t ModifierChain::kvLength(std::uint32_t b, std::uint32_t callKvLen) const {
  for (const auto& m : list) {
    if (auto n = m->kvLength(b)) return *n;
  }
  return callKvLen;
}

double ModifierChain::score(double s, const HookAt& at) const {
  for (const auto& m : list) s += m->distanceBias(at.b, at.h) * (static_cast<double>(at.k) - static_cast<double>(at.q));
  for (const auto& m : list) s = m->score(s, at);
  return s;
}

bool ModifierChain::visible(const HookAt& at) const {
  return std::all_of(list.begin(), list.end(), [&](const ModifierPtr& m) { return m->visible(at); });
}

KeyRange ModifierChain::keyRange(const HookBlock& block) const {
  KeyRange r;
  for (const auto& m : list) r = r.meet(m->keyRange(block));
  return r;
}

std::optional<double> ModifierChain::sink(std::uint32_t b, std::uint32_t h) const {
  for (const auto& m : list) {
    if (auto s = m->sink(b, h)) return s;
  }
  return std::nullopt;
}

double ModifierChain::epilogue(double o, std::uint32_t b, std::uint32_t h, std::uint32_t q, std::uint32_t d) const {
  for (const auto& m : list) o = m->epilogue(o, b, h, q, d);
  return o;
}

bool ModifierChain::rangeDependsOnHead() const {
  return std::any_of(list.begin(), list.end(), [](const ModifierPtr& m) { return m->rangeDependsOnHead(); });
}

}  // namespace foundry
