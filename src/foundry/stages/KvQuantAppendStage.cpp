#include "foundry/stages/KvQuantAppendStage.h"

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

std::uint32_t KvQuantAppendStage::groupsX(std::uint32_t headDim, DType format, std::uint32_t pos0, std::uint32_t tokens) {
  const QuantBlocks& q = storageFormat(format).blocks;
  FOUNDRY_CHECK_INTERNAL(q.version && tokens > 0, "a quantized append of {} {} rows", tokens, dtypeName(format));
  const std::uint32_t groups = (pos0 + tokens - 1) / kWorkgroup - pos0 / kWorkgroup + 1;
  return groups * ((headDim + q.dims - 1) / q.dims);
}

void KvQuantAppendStage::declare(KernelInterface& k, const DeviceInfo&) const {
  FOUNDRY_CHECK_INTERNAL(headDim_ % 4 == 0, "quantized appends write codes four at a time; head_dim {}", headDim_);
  k.buffer("k_new", dtype_, Access::ReadOnly).buffer("v_new", dtype_, Access::ReadOnly);
  k.usesBuffer("k_cache").usesBuffer("v_cache");
  for (const char* f : {"new_stride_b", "new_stride_h", "new_stride_s", "cache_pos0", "new_tokens"}) k.push(f, PushType::U32);
  glsl::declareRead(k, "NEW_READ", dtype_);
  k.constant("HEAD_DIM", headDim_);
  k.shared("kvq_max", "float", 4 * kWorkgroup, 4);  // K's and V's new rows', then their held rows' maxima
  k.extension("GL_EXT_control_flow_attributes");
  if (rope_) RopeStage::declareRope(k, *rope_);
  // Codes cannot hold a NaN or an infinity: a block with one gets a NaN scale, which every value read
  // from it shows, and keeps it through later appends. Infinity marks such a block in the maxima.
  // A block's scale is the f16 at or above absmax / 127 (KvQuant.cpp's f16Scale, bit for bit): no code
  // is clipped at 127 however f16 rounds, and a block of tiny values never gets a scale of 0. One beyond
  // f16's range is NaN too.
  k.snippet("common/finite.glsl");
  std::string text =
      "float kvq_scale(float absmax) {\n"
      "  const float step = absmax / 127.0;\n"
      "  const uint h = packHalf2x16(vec2(step, 0.0)) & 0xffffu;\n"
      "  const float s = unpackHalf2x16(unpackHalf2x16(h).x < step ? h + 1u : h).x;\n"
      "  return scale_or_nan(max(absmax, s), s);\n"
      "}\n"
      // An int8 block's scale from its old one and the largest magnitudes of its new rows and of the
      // rows it keeps (their codes times the old scale, exact). Where no kept row holds the code 127 any
      // more, the rows that set it were written over (a rollback): it is set afresh from the rows the
      // block now holds. Else it grows to fit the new rows, and a NaN on either side stays.
      "float kvq_block_scale(float old_scale, float fresh, float held) {\n"
      "  if (held < 127.0 * old_scale) return kvq_scale(max(held, fresh));\n"
      "  const float grown = kvq_scale(fresh);\n"
      "  return isnan(old_scale) || isnan(grown) ? f32_nan() : max(old_scale, grown);\n"
      "}\n"
      "uint kvq_word(float x[KV_BLOCK_DIMS], uint i, float inv) {\n"
      "  return f32_to_i8(x[i] * inv) | (f32_to_i8(x[i + 1u] * inv) << 8u) | (f32_to_i8(x[i + 2u] * inv) << 16u) |\n"
      "         (f32_to_i8(x[i + 3u] * inv) << 24u);\n"
      "}\n"
      "void kvq_store(KV_ROW kr, KV_ROW vr, uint d0, uint n, float xk[KV_BLOCK_DIMS], float xv[KV_BLOCK_DIMS], float ik,\n"
      "               float iv, bool do_k, bool do_v) {\n"
      "  [[unroll]] for (uint i = 0u; i < KV_BLOCK_DIMS; i += 4u) {\n"
      "    if (do_k && i < n) kv_store_k_codes(kr, d0 + i, kvq_word(xk, i, ik));\n"
      "    if (do_v && i < n) kv_store_v_codes(vr, d0 + i, kvq_word(xv, i, iv));\n"
      "  }\n"
      "}\n";
  k.generatedSnippet("kv_quant_append", text);
}

void KvQuantAppendStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint chunks = (HEAD_DIM + KV_BLOCK_DIMS - 1u) / KV_BLOCK_DIMS;");
  w.line("const uint t = gl_LocalInvocationIndex, kv_head = gl_WorkGroupID.y, batch = gl_WorkGroupID.z;");
  w.line("const uint first = (pc.cache_pos0 / 32u + gl_WorkGroupID.x / chunks) * 32u, key = first + t;");
  w.line("const uint d0 = (gl_WorkGroupID.x % chunks) * KV_BLOCK_DIMS, n = min(KV_BLOCK_DIMS, HEAD_DIM - d0);");
  w.line("const bool fresh = key >= pc.cache_pos0 && key - pc.cache_pos0 < pc.new_tokens;");
  w.line("const uint src = batch * pc.new_stride_b + kv_head * pc.new_stride_h + (key - pc.cache_pos0) * pc.new_stride_s;");
  // Keys past the new rows are never loaded or stored; their row stays inside the appended pages.
  w.line("const uint row_key = min(key, pc.cache_pos0 + pc.new_tokens - 1u);");
  w.line("const KV_ROW kr = kv_k_row(batch, kv_head, row_key), vr = kv_v_row(batch, kv_head, row_key);");
  w.line("float xk[KV_BLOCK_DIMS], xv[KV_BLOCK_DIMS];");
  w.line("float mk = 0.0, mv = 0.0;");
  w.open("[[unroll]] for (uint i = 0u; i < KV_BLOCK_DIMS; ++i)");
  w.line("xk[i] = 0.0, xv[i] = 0.0;");
  w.open("if (fresh && i < n)");
  w.line("const uint d = d0 + i;");
  w.line("const float k_d = NEW_READ(k_new[src + d]);");
  w.line(rope_ ? "xk[i] = d < ROPE_DIMS ? rope_rotate(d, pc.rope_pos0 + key - pc.cache_pos0, k_d, "
                 "NEW_READ(k_new[src + rope_partner(d)])) : k_d;"
               : "xk[i] = k_d;");
  w.line("xv[i] = NEW_READ(v_new[src + d]);");
  w.line("mk = max(mk, magnitude_or_inf(xk[i])), mv = max(mv, magnitude_or_inf(xv[i]));");
  w.close();
  w.close();
  w.line("float sk = kvq_scale(mk), sv = kvq_scale(mv);");
  w.line("bool requant_k = false, requant_v = false;");
  w.open("if (KV_BLOCK_KEYS > 1u)");  // a constant: the barriers below stay in uniform control flow
  // The block's old scales and rows are read before the barriers, the new scales written after.
  w.line("const bool held = first < pc.cache_pos0;  // the block holds rows of earlier appends");
  w.line("const KV_ROW k0 = kv_k_row(batch, kv_head, first), v0 = kv_v_row(batch, kv_head, first);");
  w.line("const float old_k = held ? kv_k_scale(k0, d0) : 0.0, old_v = held ? kv_v_scale(v0, d0) : 0.0;");
  w.line("float hk = 0.0, hv = 0.0;");
  w.open("[[unroll]] for (uint i = 0u; i < KV_BLOCK_DIMS; ++i)");
  w.open("if (key < pc.cache_pos0 && i < n)");
  w.line("xk[i] = kv_load_k(kr, d0 + i), xv[i] = kv_load_v(vr, d0 + i);");
  w.line("hk = max(hk, magnitude_or_inf(xk[i])), hv = max(hv, magnitude_or_inf(xv[i]));");
  w.close();
  w.close();
  w.line("kvq_max[t] = mk, kvq_max[32u + t] = mv, kvq_max[64u + t] = hk, kvq_max[96u + t] = hv;");
  w.line("memoryBarrierShared();");
  w.line("barrier();");
  w.open("for (uint s = 16u; s > 0u; s >>= 1u)");
  w.open("if (t < s)");
  w.line("[[unroll]] for (uint j = 0u; j < 128u; j += 32u) kvq_max[j + t] = max(kvq_max[j + t], kvq_max[j + t + s]);");
  w.close();
  w.line("memoryBarrierShared();");
  w.line("barrier();");
  w.close();
  w.line("sk = kvq_block_scale(old_k, kvq_max[0], kvq_max[64u]), sv = kvq_block_scale(old_v, kvq_max[32u], kvq_max[96u]);");
  w.line("requant_k = key < pc.cache_pos0 && !(sk == old_k), requant_v = key < pc.cache_pos0 && !(sv == old_v);");
  w.open("if (t == 0u)");
  w.line("kv_store_k_scale(k0, d0, sk);");
  w.line("kv_store_v_scale(v0, d0, sv);");
  w.close();
  w.close();
  w.open("else if (fresh)");  // a scale per row
  w.line("kv_store_k_scale(kr, d0, sk);");
  w.line("kv_store_v_scale(vr, d0, sv);");
  w.close();
  w.line("const float ik = sk > 0.0 ? 1.0 / sk : 0.0, iv = sv > 0.0 ? 1.0 / sv : 0.0;");
  w.line("if (fresh || requant_k || requant_v) kvq_store(kr, vr, d0, n, xk, xv, ik, iv, fresh || requant_k, fresh || requant_v);");
}

std::string KvQuantAppendStage::key() const {
  return fmt::format("D{}_{}{}", headDim_, dtypeName(dtype_),
                     rope_ ? fmt::format("_rope_r{}_{}", rope_->rotaryDims, rope_->interleaved ? "gptj" : "neox") : "");
}

}  // namespace foundry
