#include "foundry/stages/AttentionHooks.h"

#include <algorithm>

#include "foundry/DeviceInfo.h"

namespace foundry {

namespace {

HookPoint point(std::string name, std::string ret, std::vector<HookParam> params, HookCompose compose,
                std::string fallback, std::string meaning, std::string combine = {}, std::string companion = {}) {
  return {std::move(name), std::move(ret), std::move(params), compose, std::move(fallback), std::move(combine),
          std::move(meaning), std::move(companion)};
}

std::vector<HookPoint> points(HookPhase phase) {
  const HookParam b{"uint", "b"}, h{"uint", "h"}, q{"uint", "q"}, k{"uint", "k"};
  std::vector<HookPoint> out;
  out.push_back(point(hook::kKvLen, "uint", {b}, HookCompose::Single, "pc.kv_len",
                      "the number of keys of sequence b: one stage sets per-sequence lengths"));
  if (phase != HookPhase::Output) {
    out.push_back(point(hook::kDistanceBias, "float", {b, h}, HookCompose::Reduce, "0.0",
                        "the slope of a logit bias linear in the key's distance from the query, added as slope * "
                        "(k - q) before the score hooks", "hook_x + hook_y"));
    out.push_back(point(hook::kScore, "float", {{"float", "s"}, b, h, q, k}, HookCompose::Chain, "s",
                        "transforms a natural-unit logit"));
    // A mask says which keys it surely leaves visible, so tiles inside skip the element test.
    out.push_back(point(hook::kVisible, "bool", {b, h, q, k}, HookCompose::All, "true", "whether query q sees key k",
                        {}, hook::kKeyRange));
    out.push_back(point(hook::kKeyRange, "uvec4", {b, h, {"uint", "q_lo"}, {"uint", "q_hi"}}, HookCompose::Reduce,
                        "uvec4(0u, 0xffffffffu, 0u, 0xffffffffu)",
                        "which keys a block of query positions may see and which it surely sees (uvec4(0u, 0xffffffffu, "
                        "0u, 0u): any key, none surely)", "fa_range_meet(hook_x, hook_y)"));
    out.push_back(point(hook::kTileVisible, "bool",
                        {b, h, {"uint", "q_lo"}, {"uint", "q_hi"}, {"uint", "k_lo"}, {"uint", "k_hi"}},
                        HookCompose::All, "true", "whether any key of a tile is visible to the query block"));
  }
  if (phase != HookPhase::Keys) {
    out.push_back(point(hook::kSink, "float", {b, h}, HookCompose::Single, "0.0",
                        "an extra logit in the softmax denominator: one stage sets sinks"));
    out.push_back(point(hook::kEpilogue, "float", {{"float", "o"}, b, h, q, {"uint", "d"}}, HookCompose::Chain, "o",
                        "transforms a normalised output element"));
  }
  return out;
}

class OnlyHooksStage : public Stage {
 public:
  OnlyHooksStage(StagePtr inner, std::set<std::string> keep) : inner_(std::move(inner)), keep_(std::move(keep)) {}
  std::string name() const override { return inner_->name(); }
  std::string key() const override { return inner_->key(); }
  void emit(GlslWriter& w, const DeviceInfo& device) const override { inner_->emit(w, device); }
  void declare(KernelInterface& k, const DeviceInfo& device) const override {
    KernelInterface all;
    inner_->declare(all, device);
    for (const auto& b : all.buffers()) k.buffer(b.name, b.dtype, b.access, b.glslElement);
    for (const auto& p : all.pushFields()) k.push(p.name, p.type);
    for (const auto& s : all.sharedArrays()) k.shared(s.name, s.glslElement, s.count, s.elementBytes);
    for (const auto& c : all.constants()) k.constant(c.name, c.type, c.value);
    for (const auto& d : all.defines()) k.define(d.name, d.value);
    for (const auto& c : all.consumed()) k.consumes(c.name, c.type);
    for (const auto& p : all.produced()) k.produces(p.name, p.type);
    for (const auto& s : all.snippets()) k.snippet(s);
    for (const auto& s : all.inlineSnippets()) {  // with its file
      s.generated ? k.generatedSnippet(s.name, s.text) : k.snippet(GlslSource{s.name, s.text, s.origin});
    }
    for (const auto& e : all.extensions()) k.extension(e);
    for (const auto& p : all.hostedPoints()) k.hosts(p);
    for (const auto& p : all.usedPush()) k.usesPush(p);
    for (const auto& b : all.usedBuffers()) k.usesBuffer(b);
    for (const auto& h : all.hooks()) {
      if (keep_.count(h.point)) k.hook(h.point, h.function, h.hint);
    }
  }

 private:
  StagePtr inner_;
  std::set<std::string> keep_;
};

}  // namespace

std::set<std::string> attentionHookNames(HookPhase phase) {
  std::set<std::string> out;
  for (const auto& p : points(phase)) out.insert(p.name);
  return out;
}

void hostAttentionHooks(KernelInterface& k, const std::set<std::string>& names) {
  for (auto& p : points(HookPhase::All)) {
    if (names.count(p.name)) k.hosts(std::move(p));
  }
  k.usesPush("kv_len").usesPush("q_len");
  k.snippet("flashattention/hooks.glsl");
  const auto all = [&](std::initializer_list<const char*> want) {
    return std::all_of(want.begin(), want.end(), [&](const char* n) { return names.count(n) > 0; });
  };
  if (all({hook::kDistanceBias, hook::kScore, hook::kVisible, hook::kKeyRange})) k.snippet("flashattention/hooks_keys.glsl");
  if (all({hook::kSink, hook::kEpilogue})) k.snippet("flashattention/hooks_output.glsl");
}

StagePtr onlyHooks(const StagePtr& stage, const std::set<std::string>& keep, const DeviceInfo& device) {
  KernelInterface probe;
  stage->declare(probe, device);
  const auto& hooks = probe.hooks();
  if (std::none_of(hooks.begin(), hooks.end(), [&](const HookDecl& h) { return keep.count(h.point) > 0; })) return nullptr;
  return std::make_shared<OnlyHooksStage>(stage, keep);
}

}  // namespace foundry
