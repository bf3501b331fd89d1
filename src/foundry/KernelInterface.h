#pragma once
// What a stage declares: resources by logical name, compile-time constants, the symbols it consumes
// and produces, the snippets and extensions it needs. The builder owns numbering and layout.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foundry/DType.h"
#include "foundry/GlslSource.h"

namespace foundry {

/// Coherent: read and written, and what one workgroup writes is read by another workgroup of the
/// same dispatch (after a memory barrier and an atomic hand-over), so loads must not hit stale caches.
enum class Access { ReadOnly, WriteOnly, ReadWrite, Coherent };
std::string_view accessName(Access access);

/// Scalar and vector types a push-constant field may have; offsets follow std430.
enum class PushType { U32, I32, F32, UVec2, Vec2, UVec4, Vec4 };
std::string_view pushTypeGlsl(PushType type);
std::uint32_t pushTypeSize(PushType type);
std::uint32_t pushTypeAlign(PushType type);

/// A storage buffer bound by logical name. `glslElement` is how the kernel views it (e.g. "f16vec4");
/// `dtype` is the scalar element type the bound tensor must have.
struct BufferDecl {
  std::string name;
  DType dtype = DType::F32;
  std::string glslElement;  ///< defaults to the dtype's scalar type
  Access access = Access::ReadOnly;
};

struct PushDecl {
  std::string name;
  PushType type = PushType::U32;
};

/// A workgroup-shared array. `elementBytes` counts toward the device's shared-memory budget.
struct SharedDecl {
  std::string name;
  std::string glslElement;  ///< "float", "vec4", "float16_t", ...
  std::uint32_t count = 0;
  std::uint32_t elementBytes = 4;
};

/// A named value passed from one stage to a later one inside main(), e.g. "q_base : uint".
struct Symbol {
  std::string name;
  std::string type;
};

/// A compile-time constant emitted once at global scope; two stages may declare the same one only
/// with the same type and value.
struct ConstantDecl {
  std::string name;
  std::string type;  ///< "uint", "int", "float", "bool"
  std::string value;
};

/// How the hooks of several stages on one hook point combine.
enum class HookCompose {
  Chain,   ///< each provider transforms the first argument in chain order; returns it
  All,     ///< true when every provider returns true (bool)
  Reduce,  ///< providers' results folded with `combine` in chain order
  Single,  ///< at most one provider
};
std::string_view hookComposeName(HookCompose compose);

struct HookParam {
  std::string type;
  std::string name;
  bool operator==(const HookParam&) const = default;
};

/// A fixed point of a kernel where other stages may plug in code: the hosting stage calls the
/// function `name`, which the builder generates from the providers' functions (or the fallback).
struct HookPoint {
  std::string name;        ///< what the kernel calls, e.g. "fa_score"
  std::string returnType;  ///< "float", "bool", "uvec4", ...
  std::vector<HookParam> params;
  HookCompose compose = HookCompose::Chain;
  std::string fallback;    ///< GLSL expression of the params when no stage hooks the point
  std::string combine;     ///< Reduce: an expression of `hook_x` and `hook_y`
  std::string meaning;     ///< one line for errors and docs
  std::string companion;   ///< a point a stage hooking this one must hook too (empty: none)
  bool operator==(const HookPoint&) const = default;
  /// "float fa_score(float s, uint b, ...)".
  std::string signature() const;
};

/// A stage's function plugged into a hook point. A hint may be dropped by kernels that do not host
/// the point (it only saves work, e.g. skipping tiles); anything else must be hosted.
struct HookDecl {
  std::string point;
  std::string function;
  bool hint = false;
};

/// GLSL text a stage brings itself (a user's modifier), under a name unique in the kernel.
struct InlineSnippet {
  std::string name;
  std::string text;
  std::string origin;  ///< the file it was read from, named by #line and compile errors ("" for a string)
  /// Text a library stage generated (generatedSnippet): its compile errors are the library's, and the
  /// builder does not check its names against the library's as it checks a user's.
  bool generated = false;
};

/// Everything one stage declares. Stages fill it in `declare()`; nothing here is numbered.
class KernelInterface {
 public:
  KernelInterface& buffer(std::string name, DType dtype, Access access, std::string glslElement = {});
  KernelInterface& push(std::string name, PushType type);
  KernelInterface& shared(std::string name, std::string glslElement, std::uint32_t count,
                          std::uint32_t elementBytes);
  KernelInterface& constant(std::string name, std::string type, std::string value);
  KernelInterface& constant(std::string name, std::uint32_t value);
  /// A preprocessor macro, for what `const` cannot express: element types and `#if` switches.
  KernelInterface& define(std::string name, std::string value);
  KernelInterface& consumes(std::string name, std::string type);
  KernelInterface& produces(std::string name, std::string type);
  KernelInterface& snippet(std::string path);       ///< relative to kernels/, e.g. "common/online_softmax.glsl"
  /// GLSL the stage carries itself instead of a file under kernels/ (a user's own functions). It may
  /// start with `//! requires:` lines naming kernels/ snippets it needs first.
  KernelInterface& snippetText(std::string name, std::string text);
  /// GLSL a library stage generates for this kernel (a cache format's loads): as snippetText, but
  /// compile errors in it are the library's (DeviceError), not the user's (UserError).
  KernelInterface& generatedSnippet(std::string name, std::string text);
  /// GLSL the stage carries as a value: a string, or a file read when the value was made; compile
  /// errors in a file's code name the file and its line.
  KernelInterface& snippet(const GlslSource& source);
  /// A hook point this stage's code calls (see HookPoint).
  KernelInterface& hosts(HookPoint point);
  /// Plugs `function` (defined in one of this stage's snippets) into the hook point `point`.
  KernelInterface& hook(std::string point, std::string function, bool hint = false);
  /// A push-constant field or buffer this stage's code reads but another stage of the chain
  /// declares; the builder checks that one does.
  KernelInterface& usesPush(std::string name);
  KernelInterface& usesBuffer(std::string name);
  KernelInterface& extension(std::string name);     ///< e.g. "GL_KHR_shader_subgroup_arithmetic"

  const std::vector<BufferDecl>& buffers() const { return buffers_; }
  const std::vector<PushDecl>& pushFields() const { return push_; }
  const std::vector<SharedDecl>& sharedArrays() const { return shared_; }
  const std::vector<ConstantDecl>& constants() const { return constants_; }
  const std::vector<ConstantDecl>& defines() const { return defines_; }
  const std::vector<Symbol>& consumed() const { return consumes_; }
  const std::vector<Symbol>& produced() const { return produces_; }
  const std::vector<std::string>& snippets() const { return snippets_; }
  const std::vector<std::string>& extensions() const { return extensions_; }
  const std::vector<InlineSnippet>& inlineSnippets() const { return inline_; }
  const std::vector<HookPoint>& hostedPoints() const { return hosted_; }
  const std::vector<HookDecl>& hooks() const { return hooks_; }
  const std::vector<std::string>& usedPush() const { return usedPush_; }
  const std::vector<std::string>& usedBuffers() const { return usedBuffers_; }

 private:
  std::vector<BufferDecl> buffers_;
  std::vector<PushDecl> push_;
  std::vector<SharedDecl> shared_;
  std::vector<ConstantDecl> constants_, defines_;
  std::vector<Symbol> consumes_, produces_;
  std::vector<std::string> snippets_, extensions_;
  std::vector<InlineSnippet> inline_;
  std::vector<HookPoint> hosted_;
  std::vector<HookDecl> hooks_;
  std::vector<std::string> usedPush_, usedBuffers_;
};

}  // namespace foundry
