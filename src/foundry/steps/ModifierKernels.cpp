#include "foundry/steps/ModifierKernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/GlslWriter.h"
#include "foundry/Hash.h"
#include "foundry/stages/AttentionHooks.h"

namespace foundry {

namespace {

// A stage as the in-memory kernel maps know it (see KernelModifiers::key).
std::string stageKey(const Stage& stage, const DeviceInfo& device) {
  KernelInterface iface;
  stage.declare(iface, device);
  // Everything the stage declares goes into the kernel's text: its snippets, and its macros, constants,
  // buffers, push constants, shared arrays and hooks (a modifier whose key() leaves out a define's value
  // once got another's kernel).
  std::string text;
  for (const auto& s : iface.inlineSnippets()) text.append(s.name).append(1, '\n').append(s.text).append(1, '\n');
  for (const auto& s : iface.snippets()) text.append("snippet ").append(s).append(1, '\n');
  for (const auto& c : iface.defines()) text.append(fmt::format("define {} {}\n", c.name, c.value));
  for (const auto& c : iface.constants()) text.append(fmt::format("const {} {} = {}\n", c.type, c.name, c.value));
  for (const auto& b : iface.buffers()) {
    text.append(fmt::format("buffer {} {} {} {}\n", b.name, dtypeName(b.dtype), b.glslElement, accessName(b.access)));
  }
  for (const auto& p : iface.pushFields()) text.append(fmt::format("push {} {}\n", p.name, pushTypeGlsl(p.type)));
  for (const auto& a : iface.sharedArrays()) {
    text.append(fmt::format("shared {} {} {} {}\n", a.name, a.glslElement, a.count, a.elementBytes));
  }
  for (const auto& h : iface.hooks()) text.append(fmt::format("hook {} {} {}\n", h.point, h.function, h.hint));
  for (const auto& e : iface.extensions()) text.append("extension ").append(e).append(1, '\n');
  GlslWriter w(stage.name());
  stage.emit(w, device);
  return fmt::format("{}:{}:{}", stage.name(), stage.key(), hashHex(text + w.str()).substr(0, 16));
}

}  // namespace

std::string KernelModifiers::key(const DeviceInfo& device) const {
  std::string out;
  for (const auto& m : modifiers) out.append(1, '|').append(stageKey(*m, device));
  return out;
}

void KernelModifiers::addTo(KernelBuilder& builder) const {
  for (const auto& s : stages) builder.add(s);
}

void KernelModifiers::bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const {
  // A modifier sets its own push constants; one that gave a value the step set (a kv_len of its own)
  // would change what the whole kernel computes without a word. One copy of the step's values a call.
  const std::map<std::string, PushValue> before = args.push();
  for (const auto& m : modifiers) {
    m->bind(args, call, ws, tile);
    for (const auto& [name, value] : before) {
      if (args.push().at(name) != value) {
        throw UserError(name, fmt::format("modifier {} sets push constant '{}', which the kernel's own stages set; a "
                                          "modifier reads such a value (KernelInterface::usesPush) and sets only the "
                                          "push constants it declares for itself", m->name(), name));
      }
    }
  }
}

void requireHosted(const Modifiers& all, const std::set<std::string>& hosted, const DeviceInfo& device,
                   const std::string& what) {
  for (const auto& m : all) {
    KernelInterface probe;
    m->declare(probe, device);
    for (const auto& h : probe.hooks()) {
      if (h.hint || hosted.count(h.point)) continue;
      throw UserError(fmt::format("kernel {}", what),
                      fmt::format("stage {} hooks '{}' with {}, but no stage of this kernel hosts that point (hosted "
                                  "here: {})", m->name(), h.point, h.function, fmt::join(hosted, ", ")));
    }
  }
}

KernelModifiers modifiersFor(const Modifiers& all, const std::set<std::string>& points, const DeviceInfo& device) {
  KernelModifiers out;
  for (const auto& m : all) {
    StagePtr stage = onlyHooks(m, points, device);
    if (!stage) continue;
    out.modifiers.push_back(m);
    out.stages.push_back(std::move(stage));
  }
  return out;
}

std::vector<std::string> recordModifierPasses(
    StepContext& ctx, const KernelModifiers& modifiers, const ModifierCall& call, TileShape tile,
    const std::function<std::shared_ptr<const KernelSource>(const std::string&, const std::function<KernelSource()>&)>& kernel,
    const DeviceInfo& device, const std::shared_ptr<const SnippetLibrary>& snippets) {
  std::vector<std::string> names;
  for (const auto& m : modifiers.modifiers) {
    for (const auto& pass : m->passes(call, ctx.workspace, tile)) {
      const std::string key = fmt::format("pass_{}_wg{}", stageKey(*pass.stage, device), pass.workgroup);
      const auto k = kernel(key, [&] { return KernelBuilder(device, snippets).workgroup(pass.workgroup).add(pass.stage).build(); });
      ctx.dispatcher.dispatch(*k, pass.args, pass.grid);
      names.push_back(k->name);
    }
  }
  return names;
}

}  // namespace foundry
