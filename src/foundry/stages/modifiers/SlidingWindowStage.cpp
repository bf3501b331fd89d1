#include "foundry/stages/modifiers/SlidingWindowStage.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/stages/AttentionHooks.h"

namespace foundry {

SlidingWindowStage::SlidingWindowStage(std::uint32_t left, std::uint32_t right)
    : left_(std::min(left, kMaxExtent)), right_(std::min(right, kMaxExtent)) {}

std::shared_ptr<SlidingWindowStage> SlidingWindowStage::fromModelWindow(std::uint32_t window) {
  if (window == 0) throw UserError("sliding_window", "0: a window holds at least the query's own key (1 or more)");
  return std::make_shared<SlidingWindowStage>(window - 1, 0);
}

std::string SlidingWindowStage::describe() const {
  auto extent = [](std::uint32_t e) { return e == kMaxExtent ? std::string("unbounded") : std::to_string(e); };
  return fmt::format("sliding window (left {}, right {})", extent(left_), extent(right_));
}

void SlidingWindowStage::declare(KernelInterface& k, const DeviceInfo&) const {
  k.snippet("modifiers/sliding_window.glsl");
  k.push("window_left", PushType::U32).push("window_right", PushType::U32);
  // An interval of keys per query: the range is the whole mask (fa_row_span), no fa_visible needed.
  k.hook(hook::kKeyRange, "window_key_range");
}

void SlidingWindowStage::validate(const ModifierCall&) const {}

void SlidingWindowStage::bind(Arguments& args, const ModifierCall&, Workspace&, TileShape) const {
  args.set("window_left", left_).set("window_right", right_);
}

bool SlidingWindowStage::visible(const HookAt& at) const {
  return std::uint64_t(at.k) + left_ >= at.q && std::uint64_t(at.k) <= std::uint64_t(at.q) + right_;
}

KeyRange SlidingWindowStage::keyRange(const HookBlock& x) const {
  auto below = [](std::uint32_t v, std::uint32_t by) { return v > by ? v - by : 0u; };
  return {below(x.qLo, left_), x.qHi + right_ + 1, below(x.qHi, left_), x.qLo + right_ + 1};
}

}  // namespace foundry
