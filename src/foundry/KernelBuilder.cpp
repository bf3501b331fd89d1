#include "foundry/KernelBuilder.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/GlslScan.h"
#include "foundry/Hash.h"
#include "foundry/StorageFormat.h"

namespace foundry {

const BindingSlot* KernelLayout::findBinding(std::string_view name) const {
  for (const auto& b : bindings) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const PushSlot* KernelLayout::findPush(std::string_view name) const {
  for (const auto& p : push) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

namespace {

// The head of the push-constant block; parameterBlockVariant() swaps it for a storage buffer's.
constexpr std::string_view kPushBlockHead = "layout(push_constant, std430) uniform PushConstants";

std::string shortStageName(const std::string& name) {
  return name.ends_with("Stage") ? name.substr(0, name.size() - 5) : name;
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

/// The merged declarations of every stage, with who declared what, for error messages.
struct Merged {
  struct Buffer {
    BufferDecl decl;
    std::vector<std::string> stages;
  };
  struct Push {
    PushDecl decl;
    std::string stage;
  };
  struct Shared {
    SharedDecl decl;
    std::string stage;
  };
  struct Constant {
    ConstantDecl decl;
    std::string stage;
  };
  std::vector<Buffer> buffers;
  std::vector<Push> push;
  std::vector<Shared> shared;
  std::vector<Constant> constants;
  std::vector<Constant> defines;
  std::vector<std::string> extensions;
  struct Snippet {
    std::string path;  ///< kernels/ path, or "inline/<name>" for a stage's own text
    std::string text;
    std::vector<std::string> users;
    std::string origin;  ///< a stage's own file, as #line names it ("" otherwise)
    bool user = false;   ///< a stage's own text that the library did not generate
  };
  std::vector<Snippet> snippets;
  struct Hosted {
    HookPoint point;
    std::vector<std::string> stages;
  };
  std::vector<Hosted> hosted;
  struct Provider {
    HookDecl decl;
    std::string stage;
  };
  std::vector<Provider> hooks;
};

Access mergeAccess(Access a, Access b) {
  if (a == b) return a;
  return a == Access::Coherent || b == Access::Coherent ? Access::Coherent : Access::ReadWrite;
}

void mergeBuffer(Merged& m, const BufferDecl& d, const std::string& stage, const std::string& kernel) {
  for (auto& b : m.buffers) {
    if (b.decl.name != d.name) continue;
    if (b.decl.dtype != d.dtype || b.decl.glslElement != d.glslElement) {
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} declares buffer '{}' as {} ({}) but stage {} declared it as {} ({})", stage,
                                  d.name, d.glslElement, dtypeName(d.dtype), fmt::join(b.stages, ", "),
                                  b.decl.glslElement, dtypeName(b.decl.dtype)));
    }
    b.decl.access = mergeAccess(b.decl.access, d.access);
    b.stages.push_back(stage);
    return;
  }
  m.buffers.push_back({d, {stage}});
}

/// Bytes of a shared array's element where GLSL fixes them (0: a type of the stage's own, a struct).
std::uint32_t knownElementBytes(const std::string& glsl) {
  static const std::map<std::string, std::uint32_t> sizes = {
      {"float", 4},     {"int", 4},       {"uint", 4},       {"bool", 4},       {"vec2", 8},      {"vec3", 12},
      {"vec4", 16},     {"ivec2", 8},     {"ivec4", 16},     {"uvec2", 8},      {"uvec3", 12},    {"uvec4", 16},
      {"float16_t", 2}, {"f16vec2", 4},   {"f16vec4", 8},    {"uint16_t", 2},   {"int16_t", 2},   {"u16vec2", 4},
      {"u16vec4", 8},   {"int8_t", 1},    {"uint8_t", 1},    {"i8vec4", 4},     {"u8vec4", 4},    {"mat4", 64},
      {"double", 8},    {"dvec4", 32},    {"uint64_t", 8},   {"int64_t", 8}};
  const auto it = sizes.find(glsl);
  return it == sizes.end() ? 0 : it->second;
}

void mergePush(Merged& m, const PushDecl& d, const std::string& stage, const std::string& kernel) {
  for (auto& p : m.push) {
    if (p.decl.name != d.name) continue;
    if (p.decl.type != d.type) {
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} declares push constant '{}' as {} but stage {} declared it as {}", stage,
                                  d.name, pushTypeGlsl(d.type), p.stage, pushTypeGlsl(p.decl.type)));
    }
    return;
  }
  m.push.push_back({d, stage});
}

void mergeConstant(std::vector<Merged::Constant>& into, const ConstantDecl& d, const std::string& stage,
                   const std::string& kernel) {
  for (auto& c : into) {
    if (c.decl.name != d.name) continue;
    if (c.decl.type != d.type || c.decl.value != d.value) {
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} defines constant {} = {} but stage {} defined it as {}", stage, d.name,
                                  d.value, c.stage, c.decl.value));
    }
    return;
  }
  into.push_back({d, stage});
}

// GLSL keywords and reserved words a declared name must not take.
bool reservedInGlsl(const std::string& name) {
  static const std::set<std::string> words = {
      "attribute", "const", "uniform", "varying", "buffer", "shared", "coherent", "volatile", "restrict", "readonly",
      "writeonly", "atomic_uint", "layout", "centroid", "flat", "smooth", "noperspective", "patch", "sample", "break",
      "continue", "do", "for", "while", "switch", "case", "default", "if", "else", "subroutine", "in", "out", "inout",
      "float", "double", "int", "void", "bool", "true", "false", "invariant", "precise", "discard", "return", "lowp",
      "mediump", "highp", "precision", "struct", "uint", "common", "partition", "active", "asm", "class", "union",
      "enum", "typedef", "template", "this", "resource", "goto", "inline", "noinline", "public", "static", "extern",
      "external", "interface", "long", "short", "half", "fixed", "unsigned", "superp", "input", "output", "filter",
      "sizeof", "cast", "namespace", "using", "main", "pc"};
  return words.count(name) > 0 || name.starts_with("gl_") || name.find("__") != std::string::npos;
}

void checkName(const std::string& name, const char* what, const std::string& stage, const std::string& kernel) {
  bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok || reservedInGlsl(name)) {
    throw UserError(fmt::format("kernel {}", kernel),
                    fmt::format("stage {} declares {} '{}', which is not a usable GLSL identifier{}", stage, what, name,
                                ok ? " (a reserved word)" : ""));
  }
}

std::string sharedType(const SharedDecl& s) { return fmt::format("shared {}[{}]", s.glslElement, s.count); }

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

using glsl_scan::isWordChar;
using glsl_scan::wordStarts;

bool definesFunction(const std::string& text, const std::string& function) {
  for (const std::size_t at : wordStarts(text, function)) {
    std::size_t i = at + function.size();
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i < text.size() && text[i] == '(') return true;
  }
  return false;
}

std::set<std::string> pushReferences(const std::string& text) {
  std::set<std::string> out;
  for (const std::size_t at : wordStarts(text, "pc.")) {
    const std::size_t begin = at + 3;
    std::size_t end = begin;
    while (end < text.size() && isWordChar(text[end])) ++end;
    if (end > begin && !std::isdigit(static_cast<unsigned char>(text[begin]))) out.insert(text.substr(begin, end - begin));
  }
  return out;
}

// The push fields the stages called `names` declare or say they use.
std::set<std::string> pushAllowed(const std::vector<std::string>& names, const std::vector<KernelInterface>& ifaces,
                                  const std::vector<std::string>& stages) {
  std::set<std::string> out;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    if (std::find(names.begin(), names.end(), stages[i]) == names.end()) continue;
    for (const auto& p : ifaces[i].pushFields()) out.insert(p.name);
    for (const auto& p : ifaces[i].usedPush()) out.insert(p);
  }
  return out;
}

std::string hostedList(const Merged& m) {
  std::vector<std::string> names;
  for (const auto& h : m.hosted) names.push_back(h.point.name);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

// A user's hook function, where its text defines it, takes what the point passes and gives what it
// returns (glslang's own message would quote the call the builder generated, not the user's function).
void checkHookSignature(const Merged& m, const Merged::Provider& p, const HookPoint& point, const std::string& kernel) {
  const auto fits = [&](const glsl_scan::Function& f) {
    if (f.params.size() != point.params.size() || !glsl_scan::convertsImplicitly(f.returnType, point.returnType)) {
      return false;
    }
    for (std::size_t i = 0; i < f.params.size(); ++i) {
      if (!glsl_scan::convertsImplicitly(point.params[i].type, f.params[i])) return false;
    }
    return true;
  };
  std::vector<std::string> seen;
  for (const auto& sn : m.snippets) {
    if (!sn.user || std::find(sn.users.begin(), sn.users.end(), p.stage) == sn.users.end()) continue;
    for (const auto& f : glsl_scan::scanTopLevel(sn.text).functions) {
      if (f.name != p.decl.function) continue;
      if (fits(f)) return;
      seen.push_back(fmt::format("{} ({}:{})", f.text(), sn.origin.empty() ? sn.path : sn.origin, f.line));
    }
  }
  if (seen.empty()) return;  // defined where the scan does not look (a macro): glslang decides
  std::vector<std::string> types;
  for (const auto& q : point.params) types.push_back(q.type);
  throw UserError(fmt::format("kernel {}", kernel),
                  fmt::format("stage {} hooks '{}' with {}, defined as {}; the point calls it as {}: it must take ({}), "
                              "or types GLSL converts these to, and return {}",
                              p.stage, point.name, p.decl.function, fmt::join(seen, " and "), point.signature(),
                              fmt::join(types, ", "), point.returnType));
}

// A user's snippets take no file-scope name that another snippet or the builder's own declarations
// take (a function of the same parameters, or any other use of the name): glslang would report the
// redefinition inside the library's code, as a DeviceError. Kernels without a user's text skip this.
void checkSnippetNames(const Merged& m, const std::string& kernel) {
  if (std::none_of(m.snippets.begin(), m.snippets.end(), [](const auto& sn) { return sn.user; })) return;
  struct Taken {
    std::string what, where;
    bool user = false;
    bool function = false;
    std::vector<std::string> params;
  };
  std::map<std::string, std::vector<Taken>> taken;
  const std::string builder = "the builder's declarations";
  const auto generated = [&](const std::string& name, const std::string& what) {
    taken[name].push_back({fmt::format("{} {}", what, name), builder, false, false, {}});
  };
  for (const auto& b : m.buffers) generated(b.decl.name, "buffer");
  for (const auto& x : m.shared) generated(x.decl.name, "shared array");
  for (const auto& c : m.constants) generated(c.decl.name, "constant");
  for (const auto& c : m.defines) generated(c.decl.name.substr(0, c.decl.name.find('(')), "macro");
  for (const char* name : {"SUBGROUP_SIZE", "WORKGROUP_SIZE", "main"}) generated(name, "name");
  for (const auto& h : m.hosted) {
    std::vector<std::string> types;
    for (const auto& q : h.point.params) types.push_back(q.type);
    taken[h.point.name].push_back({"hook point " + h.point.signature(), builder, false, true, types});
    generated(upper(h.point.name) + "_HOOKED", "constant");
  }
  for (const auto& sn : m.snippets) {
    const std::string where = fmt::format("{} (stage {})", sn.origin.empty() ? "kernels/" + sn.path : sn.origin,
                                          fmt::join(sn.users, ", "));
    const glsl_scan::TopLevel top = glsl_scan::scanTopLevel(sn.text);
    for (const auto& f : top.functions) {
      if (f.definition) {
        taken[f.name].push_back({fmt::format("function {} at line {}", f.text(), f.line), where, sn.user, true, f.params});
      }
    }
    for (const auto& n : top.names) {
      taken[n.name].push_back({fmt::format("{} {} at line {}", n.kind, n.name, n.line), where, sn.user, false, {}});
    }
  }
  for (const auto& [name, all] : taken) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        const Taken &a = all[j], &b = all[i];
        if (a.where == b.where || !(a.user || b.user)) continue;
        if (a.function && b.function && a.params != b.params) continue;  // overloads
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("{} in {} takes the name '{}', which {} in {} takes too; rename the user's", b.what,
                                    b.where, name, a.what, a.where));
      }
    }
  }
}

// Every hook lands on a hosted point (hints may be dropped), single points take one provider, the
// function is defined by one of the stage's snippets, and fallbacks read only declared fields.
void checkHooks(Merged& m, const std::string& kernel, const std::string& chain, const std::vector<KernelInterface>& ifaces,
                const std::vector<std::string>& stages) {
  std::vector<Merged::Provider> kept;
  for (const auto& p : m.hooks) {
    auto host = std::find_if(m.hosted.begin(), m.hosted.end(), [&](const auto& h) { return h.point.name == p.decl.point; });
    if (host == m.hosted.end()) {
      if (p.decl.hint) continue;
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} hooks '{}' with {}, but no stage of this kernel hosts that point (hosted "
                                  "here: {}; chain: {})", p.stage, p.decl.point, p.decl.function, hostedList(m), chain));
    }
    for (const auto& h : m.hosted) {
      if (h.point.name != p.decl.function) continue;
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} hooks '{}' with a function named {}, the name of a hook point, whose function "
                                  "the builder generates; name the stage's function differently", p.stage,
                                  p.decl.point, p.decl.function));
    }
    for (const auto& q : kept) {
      if (q.decl.point != p.decl.point) continue;
      if (host->point.compose == HookCompose::Single) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stages {} and {} both hook '{}', which takes one stage ({}); chain: {}", q.stage,
                                    p.stage, p.decl.point, host->point.meaning, chain));
      }
      if (q.decl.function == p.decl.function) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stages {} and {} both hook '{}' with the same function {}: one stage of a kind per "
                                    "kernel (its push constants and buffers would be shared); chain: {}",
                                    q.stage, p.stage, p.decl.point, p.decl.function, chain));
      }
    }
    bool defined = false;
    std::vector<std::string> own;
    for (const auto& sn : m.snippets) {
      if (std::find(sn.users.begin(), sn.users.end(), p.stage) == sn.users.end()) continue;
      own.push_back(sn.path);
      defined = defined || definesFunction(sn.text, p.decl.function);
    }
    if (!defined) {
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} hooks '{}' with {}, but none of its snippets ({}) defines {}", p.stage,
                                  p.decl.point, p.decl.function, own.empty() ? "none" : fmt::format("{}", fmt::join(own, ", ")),
                                  p.decl.function));
    }
    checkHookSignature(m, p, host->point, kernel);
    if (!host->point.companion.empty()) {
      const auto& c = host->point.companion;
      const bool hosted = std::any_of(m.hosted.begin(), m.hosted.end(), [&](const auto& h) { return h.point.name == c; });
      const bool also = std::any_of(m.hooks.begin(), m.hooks.end(),
                                    [&](const auto& q) { return q.stage == p.stage && q.decl.point == c; });
      if (hosted && !also) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stage {} hooks '{}' but not '{}': a stage that hooks '{}' must also say, through "
                                    "'{}', {}", p.stage, p.decl.point, c, p.decl.point, c,
                                    std::find_if(m.hosted.begin(), m.hosted.end(),
                                                 [&](const auto& h) { return h.point.name == c; })->point.meaning));
      }
    }
    kept.push_back(p);
  }
  m.hooks = std::move(kept);
  for (const auto& h : m.hosted) {
    const auto allowed = pushAllowed(h.stages, ifaces, stages);
    for (const auto& f : pushReferences(h.point.fallback)) {
      if (!allowed.count(f)) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("hook point '{}' (hosted by {}) falls back to pc.{}, which its hosts neither declare "
                                    "nor use", h.point.name, fmt::join(h.stages, ", "), f));
      }
    }
  }
}

// A field or buffer a stage uses must be declared by some stage of the chain.
void checkUses(const Merged& m, const std::string& kernel, const std::vector<KernelInterface>& ifaces,
               const std::vector<std::string>& stages) {
  for (std::size_t i = 0; i < ifaces.size(); ++i) {
    for (const auto& f : ifaces[i].usedPush()) {
      if (std::none_of(m.push.begin(), m.push.end(), [&](const auto& p) { return p.decl.name == f; })) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stage {} uses push constant '{}', which no stage of the chain declares", stages[i], f));
      }
    }
    for (const auto& b : ifaces[i].usedBuffers()) {
      if (std::none_of(m.buffers.begin(), m.buffers.end(), [&](const auto& x) { return x.decl.name == b; })) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stage {} uses buffer '{}', which no stage of the chain declares", stages[i], b));
      }
    }
  }
}

// Every `pc.x` a stage's code or snippets read is a field that stage declares or says it uses, so a
// chain missing the declaring stage fails here rather than in glslang.
void checkPushReferences(const KernelSource& src, const Merged& m, const std::vector<KernelInterface>& ifaces) {
  for (const auto& block : src.blocks) {
    if (block.kind == SourceBlock::Kind::Generated) continue;
    std::string text;
    for (const auto& l : block.lines) text += l + "\n";
    const auto allowed = pushAllowed(block.users, ifaces, src.stages);
    for (const auto& f : pushReferences(text)) {
      if (allowed.count(f)) continue;
      const bool declared = std::any_of(m.push.begin(), m.push.end(), [&](const auto& p) { return p.decl.name == f; });
      throw UserError(fmt::format("kernel {}", src.name),
                      fmt::format("{} (for {}) reads pc.{}, which {} declares nor marks with usesPush{}", block.name,
                                  fmt::join(block.users, ", "), f,
                                  block.users.size() == 1 ? "the stage neither" : "none of these stages",
                                  declared ? "" : "; no stage of the chain declares it"));
    }
  }
}

std::string callArgs(const HookPoint& p) {
  std::string s;
  for (std::size_t i = 0; i < p.params.size(); ++i) s += (i ? ", " : "") + p.params[i].name;
  return s;
}

void emitHookPrototypes(GlslWriter& w, const Merged& m) {
  if (m.hosted.empty()) return;
  w.blank();
  w.line("// Hook points: what the kernel calls, composed from the stages that hook them (defined below).");
  for (const auto& h : m.hosted) {
    std::vector<std::string> by;
    for (const auto& p : m.hooks) {
      if (p.decl.point == h.point.name) by.push_back(fmt::format("{} ({})", p.decl.function, p.stage));
    }
    w.line("const bool {}_HOOKED = {};  // {}", upper(h.point.name), by.empty() ? "false" : "true",
           by.empty() ? std::string("not hooked") : fmt::format("{}", fmt::join(by, ", ")));
    w.line("{};", h.point.signature());
  }
}

void emitHookDefinitions(GlslWriter& w, const Merged& m) {
  for (const auto& h : m.hosted) {
    const HookPoint& p = h.point;
    std::vector<std::string> fns;
    for (const auto& q : m.hooks) {
      if (q.decl.point == p.name) fns.push_back(q.decl.function);
    }
    w.blank();
    w.open(p.signature());
    const std::string args = callArgs(p);
    if (fns.empty()) {
      w.line("return {};", p.fallback);
    } else if (p.compose == HookCompose::Chain) {
      const std::string& v = p.params.at(0).name;
      for (const auto& f : fns) w.line("{} = {}({});", v, f, args);
      w.line("return {};", v);
    } else if (p.compose == HookCompose::All) {
      std::vector<std::string> calls;
      for (const auto& f : fns) calls.push_back(fmt::format("{}({})", f, args));
      w.line("return {};", fmt::join(calls, " && "));
    } else if (p.compose == HookCompose::Reduce) {
      w.line("{} r = {}({});", p.returnType, fns[0], args);
      for (std::size_t i = 1; i < fns.size(); ++i) {
        w.line("{{ const {} hook_x = r, hook_y = {}({}); r = {}; }}", p.returnType, fns[i], args, p.combine);
      }
      w.line("return r;");
    } else {
      w.line("return {}({});", fns[0], args);
    }
    w.close();
  }
}

}  // namespace

KernelBuilder::KernelBuilder(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets)
    : device_(device), snippets_(std::move(snippets)) {}

KernelBuilder& KernelBuilder::name(std::string kernelName) {
  name_ = std::move(kernelName);
  return *this;
}

KernelBuilder& KernelBuilder::workgroup(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  workgroup_ = {x, y, z};
  return *this;
}

KernelBuilder& KernelBuilder::add(StagePtr stage) {
  FOUNDRY_CHECK_INTERNAL(stage != nullptr, "KernelBuilder::add(nullptr)");
  stages_.push_back(std::move(stage));
  return *this;
}

KernelBuilder& KernelBuilder::note(std::string key, std::string value) {
  notes_.emplace_back(std::move(key), std::move(value));
  return *this;
}

KernelSource KernelBuilder::build() const {
  if (stages_.empty()) throw UserError("kernel", "a kernel needs at least one stage");
  KernelSource src;
  std::vector<std::string> shortNames;
  for (const auto& s : stages_) {
    // A stage's name goes into the kernel's banners and #line markers: one printable line without quotes.
    const std::string name = s->name();
    if (name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e || c == '"' || c == '\\';
        })) {
      throw UserError("stage", fmt::format("a stage named {}: a stage's name is one line of printable ASCII without "
                                           "quotes or backslashes", foundry::quoted(name)));
    }
    src.stages.push_back(name);
    src.stageKeys.push_back(s->key());
    shortNames.push_back(shortStageName(s->name()));
  }
  if (name_.empty()) {
    std::vector<std::string> keys;
    for (const auto& k : src.stageKeys) {
      if (!k.empty()) keys.push_back(k);
    }
    src.name = sanitize(fmt::format("{}__{}", fmt::join(shortNames, "_"), fmt::join(keys, "_")));
  } else {
    src.name = sanitize(name_);
  }
  const std::string& kernel = src.name;
  const std::string chain = fmt::format("{}", fmt::join(src.stages, " -> "));

  // Declarations and the symbol contract, in stage order.
  Merged m;
  std::vector<KernelInterface> ifaces(stages_.size());
  std::map<std::string, std::pair<std::string, std::string>> produced;  // symbol -> (type, stage)
  // Buffers, shared arrays, constants, macros and symbols share the kernel's one namespace: one name, one
  // kind (stages may repeat a declaration of the same kind; its merge rules apply).
  std::map<std::string, std::pair<const char*, std::string>> named;  // name -> (kind, stage)
  const auto claim = [&](const std::string& name, const char* kind, const std::string& stage) {
    const auto [it, fresh] = named.emplace(name, std::pair{kind, stage});
    if (!fresh && std::string_view(it->second.first) != kind) {
      throw UserError(fmt::format("kernel {}", kernel),
                      fmt::format("stage {} declares {} '{}' but stage {} declared a {} of that name: buffers, shared "
                                  "arrays, constants, macros and symbols share the kernel's names (chain: {})",
                                  stage, kind, name, it->second.second, it->second.first, chain));
    }
  };
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    const std::string& stage = src.stages[i];
    KernelInterface& iface = ifaces[i];
    stages_[i]->declare(iface, device_);
    for (const auto& b : iface.buffers()) checkName(b.name, "buffer", stage, kernel);
    for (const auto& p : iface.pushFields()) checkName(p.name, "push constant", stage, kernel);
    for (const auto& s : iface.sharedArrays()) {
      checkName(s.name, "shared array", stage, kernel);
      // The budget below counts elementBytes: it must be what the element takes.
      const std::uint32_t known = knownElementBytes(s.glslElement);
      if (s.elementBytes == 0 || (known && s.elementBytes != known)) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stage {} declares shared array '{}' of {} with {} bytes an element; accepted: {}",
                                    stage, s.name, s.glslElement, s.elementBytes,
                                    known ? std::to_string(known) : std::string("1 or more")));
      }
    }
    for (const auto& c : iface.constants()) checkName(c.name, "constant", stage, kernel);
    for (const auto& c : iface.defines()) checkName(c.name.substr(0, c.name.find('(')), "macro", stage, kernel);
    for (const auto& p : iface.produced()) checkName(p.name, "symbol", stage, kernel);
    for (const auto& b : iface.buffers()) claim(b.name, "buffer", stage);
    for (const auto& s : iface.sharedArrays()) claim(s.name, "shared array", stage);
    for (const auto& c : iface.constants()) claim(c.name, "constant", stage);
    for (const auto& c : iface.defines()) claim(c.name.substr(0, c.name.find('(')), "macro", stage);
    for (const auto& p : iface.produced()) claim(p.name, "symbol", stage);
    for (const auto& b : iface.buffers()) mergeBuffer(m, b, stage, kernel);
    for (const auto& p : iface.pushFields()) mergePush(m, p, stage, kernel);
    for (const auto& c : iface.constants()) mergeConstant(m.constants, c, stage, kernel);
    for (const auto& c : iface.defines()) mergeConstant(m.defines, c, stage, kernel);
    for (const auto& c : iface.consumed()) {
      auto it = produced.find(c.name);
      if (it == produced.end()) {
        std::string later;
        for (std::size_t j = i + 1; j < stages_.size(); ++j) {
          KernelInterface probe;
          stages_[j]->declare(probe, device_);
          for (const auto& p : probe.produced()) {
            if (p.name == c.name) later = fmt::format("; {} produces it, but later in the chain", src.stages[j]);
          }
          for (const auto& s : probe.sharedArrays()) {
            if (s.name == c.name) later = fmt::format("; {} produces it, but later in the chain", src.stages[j]);
          }
        }
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stage {} consumes '{} : {}' but no earlier stage produces it{} (chain: {})", stage,
                                    c.name, c.type, later, chain));
      }
      if (it->second.first != c.type) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stage {} consumes '{} : {}' but stage {} produces it as '{}' (chain: {})", stage,
                                    c.name, c.type, it->second.second, it->second.first, chain));
      }
    }
    auto produce = [&](const std::string& symbol, const std::string& type) {
      if (auto it = produced.find(symbol); it != produced.end()) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stages {} and {} both produce '{}' (chain: {})", it->second.second, stage, symbol,
                                    chain));
      }
      produced[symbol] = {type, stage};
    };
    for (const auto& s : iface.sharedArrays()) {
      produce(s.name, sharedType(s));
      m.shared.push_back({s, stage});
    }
    for (const auto& p : iface.produced()) produce(p.name, p.type);
    for (const auto& e : iface.extensions()) {
      if (std::find(m.extensions.begin(), m.extensions.end(), e) == m.extensions.end()) m.extensions.push_back(e);
    }
    // Snippets with their `//! requires:` dependencies first, each once, in first-use order.
    std::map<std::string, std::string> origins;  // inline snippet path -> the file a stage read it from
    std::function<void(const std::string&, const InlineSnippet*, std::set<std::string>&)> addSnippet =
        [&](const std::string& path, const InlineSnippet* own, std::set<std::string>& visiting) {
          const std::string* inlineText = own ? &own->text : nullptr;
          if (visiting.count(path)) {
            throw UserError(fmt::format("kernel {}", kernel),
                            fmt::format("snippet {} requires itself through a cycle (stage {})", path, stage));
          }
          for (auto& sn : m.snippets) {
            if (sn.path != path) continue;
            if (inlineText && *inlineText != sn.text) {
              throw UserError(fmt::format("kernel {}", kernel),
                              fmt::format("stages {} and {} bring different GLSL under the same snippet name '{}'",
                                          fmt::join(sn.users, ", "), stage, path));
            }
            if (std::find(sn.users.begin(), sn.users.end(), stage) == sn.users.end()) sn.users.push_back(stage);
            return;
          }
          std::string text;
          if (inlineText) {
            text = *inlineText;
          } else {
            if (!snippets_->has(path)) {
              throw UserError(fmt::format("kernel {}", kernel),
                              fmt::format("stage {} asks for snippet kernels/{}, which the snippet library ({}) does "
                                          "not hold; a stage's own GLSL goes in through KernelInterface::snippetText",
                                          stage, path, snippets_->origin()));
            }
            text = snippets_->text(path);
          }
          visiting.insert(path);
          for (const auto& dep : snippetRequirements(text)) addSnippet(dep, nullptr, visiting);
          visiting.erase(path);
          const auto origin = origins.find(path);
          m.snippets.push_back(
              {path, std::move(text), {stage}, origin == origins.end() ? "" : origin->second, own && !own->generated});
        };
    for (const auto& sn : iface.snippets()) {
      std::set<std::string> visiting;
      addSnippet(sn, nullptr, visiting);
    }
    for (const auto& sn : iface.inlineSnippets()) {
      checkName(sn.name, "inline snippet", stage, kernel);
      if (!sn.origin.empty()) origins["inline/" + sn.name] = sn.origin;
      std::set<std::string> visiting;
      addSnippet("inline/" + sn.name, &sn, visiting);
    }
    for (const auto& hp : iface.hostedPoints()) {
      checkName(hp.name, "hook point", stage, kernel);
      auto it = std::find_if(m.hosted.begin(), m.hosted.end(), [&](const auto& h) { return h.point.name == hp.name; });
      if (it == m.hosted.end()) {
        m.hosted.push_back({hp, {stage}});
      } else if (!(it->point == hp)) {
        throw UserError(fmt::format("kernel {}", kernel),
                        fmt::format("stages {} and {} host hook point '{}' with different contracts ({} vs {})",
                                    fmt::join(it->stages, ", "), stage, hp.name, it->point.signature(), hp.signature()));
      } else {
        it->stages.push_back(stage);
      }
    }
    for (const auto& h : iface.hooks()) {
      checkName(h.function, "hook function", stage, kernel);
      m.hooks.push_back({h, stage});
    }
  }

  checkHooks(m, kernel, chain, ifaces, src.stages);
  checkUses(m, kernel, ifaces, src.stages);
  checkSnippetNames(m, kernel);

  for (const auto& s : m.shared) {
    if (s.decl.elementBytes == 2 && !device_.fp16Arithmetic) {
      throw UnsupportedError(fmt::format("kernel {}: stage {} keeps f16 values in shared memory ('{}'), but device '{}' "
                                         "has no fp16 arithmetic", kernel, s.stage, s.decl.name, device_.name));
    }
  }

  // Budgets the device must hold.
  std::uint64_t sharedBytes = 0;  // 64 bits: a count times its element's bytes may pass 2^32
  std::vector<std::string> sharedParts;
  for (const auto& s : m.shared) {
    const std::uint64_t bytes = (std::uint64_t(s.decl.count) * s.decl.elementBytes + 15u) & ~std::uint64_t(15);
    sharedBytes += bytes;
    sharedParts.push_back(fmt::format("{}.{} {} B", s.stage, s.decl.name, bytes));
  }
  if (sharedBytes > device_.maxSharedMemoryBytes) {
    throw UnsupportedError(fmt::format("kernel {} needs {} bytes of shared memory ({}) but device '{}' allows {}",
                                       kernel, sharedBytes, fmt::join(sharedParts, ", "), device_.name,
                                       device_.maxSharedMemoryBytes));
  }
  const std::uint32_t invocations = workgroup_[0] * workgroup_[1] * workgroup_[2];
  if (invocations == 0 || invocations > device_.maxWorkgroupInvocations) {
    throw UnsupportedError(fmt::format("kernel {} uses a workgroup of {}x{}x{} invocations; device '{}' allows 1..{}",
                                       kernel, workgroup_[0], workgroup_[1], workgroup_[2], device_.name,
                                       device_.maxWorkgroupInvocations));
  }
  for (std::size_t i = 0; i < 3; ++i) {
    if (workgroup_[i] > device_.maxWorkgroupSize[i]) {
      throw UnsupportedError(fmt::format("kernel {} uses a workgroup of {}x{}x{} invocations; device '{}' allows at most "
                                         "{} along each of x, y and z", kernel, workgroup_[0], workgroup_[1],
                                         workgroup_[2], device_.name, fmt::join(device_.maxWorkgroupSize, "x")));
    }
  }
  if (invocations % device_.subgroupSize != 0) {
    throw UnsupportedError(fmt::format("kernel {}: workgroup of {} invocations is not a multiple of the subgroup size {}",
                                       kernel, invocations, device_.subgroupSize));
  }

  // Numbering: bindings in first-declaration order, push constants at std430 offsets.
  for (std::size_t i = 0; i < m.buffers.size(); ++i) {
    const auto& d = m.buffers[i].decl;
    src.layout.bindings.push_back({d.name, static_cast<std::uint32_t>(i), d.dtype, d.glslElement, d.access});
  }
  std::uint32_t offset = 0;
  std::uint32_t maxAlign = 4;
  for (const auto& p : m.push) {
    const std::uint32_t align = pushTypeAlign(p.decl.type);
    maxAlign = std::max(maxAlign, align);
    offset = (offset + align - 1) / align * align;
    src.layout.push.push_back({p.decl.name, p.decl.type, offset});
    offset += pushTypeSize(p.decl.type);
  }
  src.layout.pushBytes = m.push.empty() ? 0 : (offset + maxAlign - 1) / maxAlign * maxAlign;
  if (src.layout.pushBytes > device_.maxPushConstantBytes) {
    std::vector<std::string> fields;
    for (const auto& p : m.push) fields.push_back(fmt::format("{}.{}", p.stage, p.decl.name));
    throw UnsupportedError(fmt::format("kernel {} needs {} bytes of push constants ({}) but device '{}' allows {}",
                                       kernel, src.layout.pushBytes, fmt::join(fields, ", "), device_.name,
                                       device_.maxPushConstantBytes));
  }
  src.layout.sharedBytes = static_cast<std::uint32_t>(sharedBytes);  // within the device's limit
  src.layout.workgroup = workgroup_;
  src.layout.subgroupSize = device_.subgroupSize;

  // Emission.
  GlslWriter w(kernel + ".comp");
  w.line("#version 450");
  w.line("#extension GL_GOOGLE_cpp_style_line_directive : require");
  bool uses16 = false, halfValues = false;
  for (const auto& b : m.buffers) uses16 |= storageFormat(b.decl.dtype).needs16BitStorage;
  for (const auto& s : m.shared) halfValues |= s.decl.elementBytes == 2;
  if (uses16 || halfValues) w.line("#extension GL_EXT_shader_16bit_storage : require");
  // f16 values outside buffers (shared memory, registers) need the float16 arithmetic types.
  if (halfValues) w.line("#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require");
  for (const auto& e : m.extensions) {
    if (e == "GL_NV_cooperative_matrix") src.usesCoopMat = true;
    // What Debian 12's shaderc cannot compile goes to the external glslc.
    if (e == "GL_NV_cooperative_matrix2" || e == "GL_KHR_cooperative_matrix" || e == "GL_EXT_bfloat16") {
      src.usesCoopMat2 = true;
    }
    if (e == "GL_EXT_bfloat16") src.usesBf16 = true;
    w.line("#extension {} : require", e);
  }
  w.blank();
  w.line("// Kernel {}", kernel);
  w.line("// Stages: {}", chain);
  for (std::size_t i = 0; i < src.stages.size(); ++i) {
    if (!src.stageKeys[i].empty()) w.line("//   {}: {}", src.stages[i], src.stageKeys[i]);
  }
  w.line("// Generated for: {} (subgroup {}, shared memory {} B)", device_.name, device_.subgroupSize,
         device_.maxSharedMemoryBytes);
  w.blank();
  w.line("layout(local_size_x = {}, local_size_y = {}, local_size_z = {}) in;", workgroup_[0], workgroup_[1],
         workgroup_[2]);
  w.blank();
  w.line("const uint SUBGROUP_SIZE = {}u;", device_.subgroupSize);
  w.line("const uint WORKGROUP_SIZE = {}u;", invocations);
  for (const auto& c : m.defines) w.line("#define {} {}  // {}", c.decl.name, c.decl.value, c.stage);
  for (const auto& c : m.constants) w.line("const {} {} = {};  // {}", c.decl.type, c.decl.name, c.decl.value, c.stage);
  w.blank();
  for (std::size_t i = 0; i < m.buffers.size(); ++i) {
    const auto& b = m.buffers[i];
    const char* qual = b.decl.access == Access::ReadOnly    ? "readonly "
                       : b.decl.access == Access::WriteOnly ? "writeonly "
                       : b.decl.access == Access::Coherent  ? "coherent "
                                                            : "";
    w.line("layout(std430, set = 0, binding = {}) restrict {}buffer Buffer_{} {{ {} {}[]; }};  // {}", i, qual,
           b.decl.name, b.decl.glslElement, b.decl.name, fmt::join(b.stages, ", "));
  }
  if (!m.push.empty()) {
    w.blank();
    w.open(kPushBlockHead);
    for (std::size_t i = 0; i < m.push.size(); ++i) {
      w.line("{} {};  // offset {}, {}", pushTypeGlsl(m.push[i].decl.type), m.push[i].decl.name,
             src.layout.push[i].offset, m.push[i].stage);
    }
    w.close(" pc;");
  }
  if (!m.shared.empty()) {
    w.blank();
    for (const auto& s : m.shared) {
      w.line("shared {} {}[{}];  // {}", s.decl.glslElement, s.decl.name, s.decl.count, s.stage);
    }
  }
  emitHookPrototypes(w, m);
  for (const auto& sn : m.snippets) {
    w.blank();
    w.snippet(sn.path, sn.text, sn.users, sn.origin, sn.user);
  }
  emitHookDefinitions(w, m);
  w.blank();
  w.open("void main()");
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    if (i) w.blank();
    w.banner(fmt::format("stage {}/{}: {}{}", i + 1, stages_.size(), src.stages[i],
                         src.stageKeys[i].empty() ? "" : " [" + src.stageKeys[i] + "]"));
    w.beginStage(src.stages[i]);
    stages_[i]->emit(w, device_);
    w.endStage();
  }
  w.close();

  src.glsl = w.str();
  src.blocks = w.blocks();
  checkPushReferences(src, m, ifaces);
  src.hash = hashHex(src.glsl);
  src.notes = notes_;
  return src;
}

KernelSource parameterBlockVariant(const KernelSource& kernel) {
  if (kernel.layout.push.empty()) return kernel;
  FOUNDRY_CHECK_INTERNAL(!kernel.layout.findBinding(kParameterBinding),
                         "kernel {} already reads its push constants from a buffer", kernel.name);
  KernelSource out = kernel;
  const auto binding = static_cast<std::uint32_t>(kernel.layout.bindings.size());
  // std430 in both blocks: the fields keep their offsets, and `pc.name` reads the same field. The
  // head is one line of each, so line numbers (and the #line blocks) stay as they were.
  const std::string head = fmt::format("{} {{", kPushBlockHead);
  const std::size_t at = out.glsl.find(head);
  FOUNDRY_CHECK_INTERNAL(at != std::string::npos, "kernel {} has no push-constant block", kernel.name);
  out.glsl.replace(at, kPushBlockHead.size(),
                   fmt::format("layout(std430, set = 0, binding = {}) restrict readonly buffer ParameterBlock", binding));
  out.name += "__params";
  out.hash = hashHex(out.glsl);
  out.layout.bindings.push_back({std::string(kParameterBinding), binding, DType::U32, "uint", Access::ReadOnly});
  out.notes.emplace_back("push constants", fmt::format("read from the parameter block at binding {}", binding));
  return out;
}

}  // namespace foundry
