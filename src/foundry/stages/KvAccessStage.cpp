#include "foundry/stages/KvAccessStage.h"

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

const char* const KvAccessStage::kStrideFields[6] = {"k_stride_b", "k_stride_h", "k_stride_s",
                                                     "v_stride_b", "v_stride_h", "v_stride_s"};

std::string KvAccess::key() const { return fmt::format("{}_w{}{}", dtypeName(format), width, write ? "_store" : ""); }

void KvAccessStage::declare(KernelInterface& k, const DeviceInfo&) const {
  FOUNDRY_CHECK_INTERNAL(!a_.write || a_.width == 1, "KV stores go one element at a time, not {}", a_.width);
  const std::string view = glsl::view(a_.format, a_.width);
  const Access access = a_.write ? Access::WriteOnly : Access::ReadOnly;
  k.buffer("k_cache", a_.format, access, view).buffer("v_cache", a_.format, access, view);
  for (const char* f : kStrideFields) k.push(f, PushType::U32);
  glsl::declareFormat(k, a_.format);
  // A single element is widened as it is loaded: 16-bit registers would need 16-bit arithmetic types.
  const bool single = a_.width == 1;
  k.define("KV_WIDTH", fmt::format("{}u", a_.width));
  k.define("KV_RAW", single ? "float" : view);
  k.define("KV_UNPACK(r, p)", single ? "(r)" : glsl::unpack(a_.format, a_.width));
  std::string text;
  for (const char kv : {'k', 'v'}) {
    text += fmt::format("uint kv_{0}_row(uint b, uint h, uint key) {{ return b * pc.{0}_stride_b + h * pc.{0}_stride_h + "
                        "key * pc.{0}_stride_s; }}\n", kv);
    if (a_.write) {
      text += fmt::format("void kv_store_{0}(uint at, float x) {{ {0}_cache[at] = {1}; }}\n", kv,
                          glsl::convert(a_.format, "x"));
    } else {
      const std::string element = fmt::format("{}_cache[at / KV_WIDTH]", kv);
      text += fmt::format("KV_RAW kv_load_{}(uint at) {{ return {}; }}\n", kv,
                          single ? glsl::read(a_.format, element) : element);
    }
  }
  k.snippetText("kv_access", text);
}

}  // namespace foundry
