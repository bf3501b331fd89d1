#include "foundry/stages/KvAccessStage.h"

#include <vector>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

std::string KvAccess::key() const {
  const QuantBlocks& q = storageFormat(format).blocks;
  return fmt::format("{}{}_w{}{}{}{}{}", dtypeName(format), q.version ? fmt::format("v{}", q.version) : "", width,
                     write ? "_store" : "", pageSize ? fmt::format("_pg{}", pageSize) : "", keysOnly ? "_konly" : "",
                     words ? "_words" : "");
}

namespace {

// A row function of `kv`'s rows returning `type` from `seq`, what the batch stride steps over (the
// sequence, or the page through the block table: kv_seq), and `slot`, what the row stride steps over
// (the key, or its row in the page): kv_{kv}_row_in(seq, h, key), and kv_{kv}_row(b, h, key) through it.
std::string rowFunctions(const KvAccess& a, char kv, const std::string& type, const std::string& body) {
  return fmt::format("{0} kv_{1}_row_in(uint seq, uint h, uint key) {{ const uint slot = {2}; return {3}; }}\n"
                     "{0} kv_{1}_row(uint b, uint h, uint key) {{ return kv_{1}_row_in(kv_seq(b, key), h, key); }}\n",
                     type, kv, a.pageSize ? "key % KV_PAGE_SIZE" : "key", body);
}

// The element offset of a row for the strides `{prefix}_stride_b/h/s`, from seq, h and `slot`.
std::string rowOffset(const std::string& prefix, const std::string& slot = "slot") {
  return fmt::format("seq * pc.{0}_stride_b + h * pc.{0}_stride_h + {1} * pc.{0}_stride_s", prefix, slot);
}

// Float formats: a row is an element offset, a load is one view element.
std::string floatAccess(const KvAccess& a, char kv) {
  std::string text = rowFunctions(a, kv, "uint", rowOffset(std::string(1, kv)));
  if (a.write) {
    return text + fmt::format("void kv_store_{0}(uint row, uint d, float x) {{ {0}_cache[row + d] = {1}; }}\n", kv,
                              glsl::convert(a.format, "x"));
  }
  const std::string element = fmt::format("{}_cache[(row + d) / KV_WIDTH]", kv);
  if (a.words) {
    // One component of the view: a 4-byte load of its own, not the whole element.
    text += fmt::format("uint kv_load_{0}_word(uint row, uint d) {{ const uint at = row + d; return "
                        "{0}_cache[at / KV_WIDTH][(at % KV_WIDTH) / 2u]; }}\n", kv);
  }
  return text + fmt::format("KV_RAW kv_load_{}(uint row, uint d) {{ return {}; }}\n", kv,
                            a.width == 1 ? glsl::read(a.format, element) : element);
}

// int8: codes four to a word in k_cache, f16 scales (as uint16_t bits) in k_scales; a row is
// uvec2(element offset, offset of its block row of scales).
std::string int8Access(const KvAccess& a, char kv) {
  const std::string k(1, kv);
  std::string text = rowFunctions(a, kv, "uvec2",
                                  fmt::format("uvec2({}, {})", rowOffset(k), rowOffset(k + "_scale", "(slot / KV_BLOCK_KEYS)")));
  text += fmt::format(
      "float kv_{0}_scale(uvec2 row, uint d) {{ return unpackHalf2x16(uint({0}_scales[row.y + d / KV_BLOCK_DIMS])).x; }}\n",
      kv);
  if (a.write) {
    text += fmt::format(
        "void kv_store_{0}_scale(uvec2 row, uint d, float s) {{ {0}_scales[row.y + d / KV_BLOCK_DIMS] = "
        "uint16_t(packHalf2x16(vec2(s, 0.0))); }}\n"
        "void kv_store_{0}_codes(uvec2 row, uint d, uint w) {{ {0}_cache[(row.x + d) / 4u] = w; }}\n",
        kv);
  }
  const char* word = a.width <= 4 ? "{0}_cache[at / 4u]" : "{0}_cache[at / KV_WIDTH]";
  const std::string load = fmt::format(fmt::runtime(word), kv);
  if (a.width == 1) {
    return text + fmt::format("float kv_load_{0}(uvec2 row, uint d) {{ const uint at = row.x + d; return "
                              "i8_to_f32({1} >> (8u * (at % 4u))) * kv_{0}_scale(row, d); }}\n", kv, load);
  }
  if (a.width >= 4) {
    // The codes alone, for loads whose scale is read once for several keys (DecodeVariant::stepScales).
    text += fmt::format("{} kv_load_{}_codes(uvec2 row, uint d) {{ const uint at = row.x + d; return {}; }}\n",
                        a.width == 4 ? "uint" : a.width == 8 ? "uvec2" : "uvec4", kv, load);
  }
  return text + fmt::format("KV_RAW kv_load_{0}(uvec2 row, uint d) {{ const uint at = row.x + d; return KV_RAW({1}{2}, "
                            "kv_{0}_scale(row, d)); }}\n", kv, load, a.width == 2 ? " >> (8u * (at % 4u))" : "");
}

// q8_0: blocks of 17 uint16_t (the f16 scale, then 32 codes two to a word); a row is an element offset
// at a block boundary.
std::string q8Access(const KvAccess& a, char kv) {
  std::string text = rowFunctions(a, kv, "uint", rowOffset(std::string(1, kv)));
  text += fmt::format(
      "uint kv_{0}_word(uint at) {{ return (at / 32u) * 17u + 1u + (at % 32u) / 2u; }}\n"
      "uint kv_{0}_pair(uint i) {{ return uint({0}_cache[i]) | (uint({0}_cache[i + 1u]) << 16u); }}\n"
      "float kv_{0}_scale(uint row, uint d) {{ return unpackHalf2x16(uint({0}_cache[((row + d) / 32u) * 17u])).x; }}\n",
      kv);
  if (a.write) {
    text += fmt::format(
        "void kv_store_{0}_scale(uint row, uint d, float s) {{ {0}_cache[((row + d) / 32u) * 17u] = "
        "uint16_t(packHalf2x16(vec2(s, 0.0))); }}\n"
        "void kv_store_{0}_codes(uint row, uint d, uint w) {{ const uint i = kv_{0}_word(row + d); "
        "{0}_cache[i] = uint16_t(w & 0xffffu); {0}_cache[i + 1u] = uint16_t(w >> 16u); }}\n",
        kv);
  }
  std::string q;
  switch (a.width) {
    case 1:
      return text + fmt::format("float kv_load_{0}(uint row, uint d) {{ const uint at = row + d; return "
                                "i8_to_f32(uint({0}_cache[kv_{0}_word(at)]) >> (8u * (at % 2u))) * "
                                "kv_{0}_scale(row, d); }}\n", kv);
    case 2: q = fmt::format("uint({}_cache[i])", kv); break;
    case 4: q = fmt::format("kv_{}_pair(i)", kv); break;
    case 8: q = fmt::format("uvec2(kv_{0}_pair(i), kv_{0}_pair(i + 2u))", kv); break;
    default: q = fmt::format("uvec4(kv_{0}_pair(i), kv_{0}_pair(i + 2u), kv_{0}_pair(i + 4u), kv_{0}_pair(i + 6u))", kv);
  }
  return text + fmt::format("KV_RAW kv_load_{0}(uint row, uint d) {{ const uint i = kv_{0}_word(row + d); return "
                            "KV_RAW({1}, kv_{0}_scale(row, d)); }}\n", kv, q);
}

// The register a quantized load of `width` codes lands in: the codes as words, and their scale.
std::string quantRaw(std::uint32_t width) {
  return fmt::format("struct KvQuantLoad {{ {} q; float s; }};\n", width <= 4 ? "uint" : width == 8 ? "uvec2" : "uvec4");
}

}  // namespace

void KvAccessStage::declare(KernelInterface& k, const DeviceInfo&) const {
  FOUNDRY_CHECK_INTERNAL(!a_.write || a_.width == 1, "KV stores go one element at a time, not {}", a_.width);
  const StorageFormat& f = storageFormat(a_.format);
  FOUNDRY_CHECK_INTERNAL(!a_.words || (!f.blocks.version && f.bytes == 2 && a_.width >= 4),
                         "single-word loads of {} in loads of {}", dtypeName(a_.format), a_.width);
  const QuantBlocks& q = f.blocks;
  const bool single = a_.width == 1;
  const std::string view = glsl::view(a_.format, a_.width);
  const Access access = a_.write ? (q.version ? Access::ReadWrite : Access::WriteOnly) : Access::ReadOnly;
  // The roles this kernel reaches: k and v, or k alone.
  const std::vector<char> roles = a_.keysOnly ? std::vector<char>{'k'} : std::vector<char>{'k', 'v'};
  for (const char kv : roles) {
    k.buffer(fmt::format("{}_cache", kv), a_.format, access, view);
    for (const char* part : {"b", "h", "s"}) k.push(fmt::format("{}_stride_{}", kv, part), PushType::U32);
  }
  glsl::declareFormat(k, a_.format);
  k.define("KV_WIDTH", fmt::format("{}u", a_.width));
  std::string text;
  if (a_.pageSize) {
    k.buffer("block_table", DType::U32, Access::ReadOnly).push("block_table_stride", PushType::U32);
    k.define("KV_PAGE_SIZE", fmt::format("{}u", a_.pageSize));
    text += "uint kv_seq(uint b, uint key) { return block_table[b * pc.block_table_stride + key / KV_PAGE_SIZE]; }\n";
  } else {
    text += "uint kv_seq(uint b, uint key) { return b; }\n";
  }
  if (!q.version) {
    // A single element is widened as it is loaded: 16-bit registers would need 16-bit arithmetic types.
    k.define("KV_ROW", "uint");
    k.define("KV_RAW", single ? "float" : view);
    k.define("KV_UNPACK(r, p)", single ? "(r)" : glsl::unpack(a_.format, a_.width, a_.words ? 2 : 0));
    if (a_.words) k.define("KV_WORD_UNPACK(r)", glsl::unpack(a_.format, 2));
    k.define("KV_SCALE(r)", "1.0").define("KV_CODES(r, p)", "KV_UNPACK(r, p)");
    // Eight values as the cooperative-matrix kernels stage them: f16 and bf16 (coopmat2's bf16 operands)
    // as they are loaded.
    if ((a_.format == DType::F16 || a_.format == DType::BF16) && a_.width == 8) k.define("KV_TILE8(r)", "(r)");
    for (const char kv : roles) text += floatAccess(a_, kv);
    k.generatedSnippet("kv_access", text);
    return;
  }
  k.define("KV_BLOCK_KEYS", fmt::format("{}u", q.keys)).define("KV_BLOCK_DIMS", fmt::format("{}u", q.dims));
  if (!q.inlineScales) {
    for (const char kv : roles) {
      k.buffer(fmt::format("{}_scales", kv), DType::F16, access, "uint16_t");
      for (const char* part : {"b", "h", "s"}) k.push(fmt::format("{}_scale_stride_{}", kv, part), PushType::U32);
    }
  }
  k.define("KV_ROW", q.inlineScales ? "uint" : "uvec2");
  k.define("KV_RAW", single ? "float" : "KvQuantLoad");
  if (!single) text += quantRaw(a_.width);
  // A load never crosses a block: its codes share one scale, which a dot product or a weight can take
  // once per load instead of once per value (KV_CODES and KV_SCALE); KV_UNPACK is the two together.
  k.define("KV_SCALE(r)", single ? "1.0" : "(r).s");
  k.define("KV_CODES(r, p)", single          ? "(r)"
                             : a_.width == 2 ? "i8x2_to_f32((r).q)"
                             : a_.width == 4 ? "i8x4_to_f32((r).q)"
                                             : "i8x4_to_f32((r).q[p])");
  k.define("KV_UNPACK(r, p)", single ? "(r)" : "(KV_CODES(r, p) * KV_SCALE(r))");
  // Four codes as stored (signed bytes, the lowest first), for integer dot products.
  if (a_.width >= 4) k.define("KV_CODE_WORD(r, p)", a_.width == 4 ? "(r).q" : "(r).q[p]");
  if (a_.width == 8) {
    // Dequantized to f16 for the cooperative-matrix kernel, saturating at the f16 range.
    k.define("KV_TILE8(r)", "kv_f16x8(r)");
    text += "uvec4 kv_f16x8(KvQuantLoad r) {\n"
            "  const vec4 a = clamp(i8x4_to_f32(r.q.x) * r.s, -65504.0, 65504.0);\n"
            "  const vec4 b = clamp(i8x4_to_f32(r.q.y) * r.s, -65504.0, 65504.0);\n"
            "  return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));\n"
            "}\n";
  }
  for (const char kv : roles) text += q.inlineScales ? q8Access(a_, kv) : int8Access(a_, kv);
  k.generatedSnippet("kv_access", text);
}

}  // namespace foundry
