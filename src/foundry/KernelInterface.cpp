#include "foundry/KernelInterface.h"

namespace foundry {

std::string_view accessName(Access access) {
  switch (access) {
    case Access::ReadOnly: return "readonly";
    case Access::WriteOnly: return "writeonly";
    case Access::ReadWrite: return "readwrite";
    case Access::Coherent: return "coherent";
  }
  return "?";
}

std::string_view pushTypeGlsl(PushType type) {
  switch (type) {
    case PushType::U32: return "uint";
    case PushType::I32: return "int";
    case PushType::F32: return "float";
    case PushType::UVec2: return "uvec2";
    case PushType::Vec2: return "vec2";
    case PushType::UVec4: return "uvec4";
    case PushType::Vec4: return "vec4";
  }
  return "uint";
}

std::uint32_t pushTypeSize(PushType type) {
  switch (type) {
    case PushType::U32:
    case PushType::I32:
    case PushType::F32: return 4;
    case PushType::UVec2:
    case PushType::Vec2: return 8;
    case PushType::UVec4:
    case PushType::Vec4: return 16;
  }
  return 4;
}

std::uint32_t pushTypeAlign(PushType type) { return pushTypeSize(type); }

std::string_view hookComposeName(HookCompose compose) {
  switch (compose) {
    case HookCompose::Chain: return "chain";
    case HookCompose::All: return "all";
    case HookCompose::Reduce: return "reduce";
    case HookCompose::Single: return "single";
  }
  return "?";
}

std::string HookPoint::signature() const {
  std::string s = returnType + " " + name + "(";
  for (std::size_t i = 0; i < params.size(); ++i) s += (i ? ", " : "") + params[i].type + " " + params[i].name;
  return s + ")";
}

KernelInterface& KernelInterface::buffer(std::string name, DType dtype, Access access, std::string glslElement) {
  if (glslElement.empty()) glslElement = std::string(glslScalarType(dtype));
  buffers_.push_back({std::move(name), dtype, std::move(glslElement), access});
  return *this;
}

KernelInterface& KernelInterface::push(std::string name, PushType type) {
  push_.push_back({std::move(name), type});
  return *this;
}

KernelInterface& KernelInterface::shared(std::string name, std::string glslElement, std::uint32_t count,
                                         std::uint32_t elementBytes) {
  shared_.push_back({std::move(name), std::move(glslElement), count, elementBytes});
  return *this;
}

KernelInterface& KernelInterface::constant(std::string name, std::string type, std::string value) {
  constants_.push_back({std::move(name), std::move(type), std::move(value)});
  return *this;
}

KernelInterface& KernelInterface::constant(std::string name, std::uint32_t value) {
  return constant(std::move(name), "uint", std::to_string(value) + "u");
}

KernelInterface& KernelInterface::define(std::string name, std::string value) {
  defines_.push_back({std::move(name), "#define", std::move(value)});
  return *this;
}

KernelInterface& KernelInterface::consumes(std::string name, std::string type) {
  consumes_.push_back({std::move(name), std::move(type)});
  return *this;
}

KernelInterface& KernelInterface::produces(std::string name, std::string type) {
  produces_.push_back({std::move(name), std::move(type)});
  return *this;
}

KernelInterface& KernelInterface::snippet(std::string path) {
  snippets_.push_back(std::move(path));
  return *this;
}

KernelInterface& KernelInterface::snippetText(std::string name, std::string text) {
  inline_.push_back({std::move(name), std::move(text)});
  return *this;
}

KernelInterface& KernelInterface::generatedSnippet(std::string name, std::string text) {
  inline_.push_back({std::move(name), std::move(text), {}, true});
  return *this;
}

KernelInterface& KernelInterface::snippet(const GlslSource& source) {
  inline_.push_back({source.name, source.text, source.origin});
  return *this;
}

KernelInterface& KernelInterface::hosts(HookPoint point) {
  hosted_.push_back(std::move(point));
  return *this;
}

KernelInterface& KernelInterface::hook(std::string point, std::string function, bool hint) {
  hooks_.push_back({std::move(point), std::move(function), hint});
  return *this;
}

KernelInterface& KernelInterface::usesPush(std::string name) {
  usedPush_.push_back(std::move(name));
  return *this;
}

KernelInterface& KernelInterface::usesBuffer(std::string name) {
  usedBuffers_.push_back(std::move(name));
  return *this;
}

KernelInterface& KernelInterface::extension(std::string name) {
  extensions_.push_back(std::move(name));
  return *this;
}

}  // namespace foundry
