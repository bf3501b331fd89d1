#!/usr/bin/env python3
"""Copies of kernels/ with one part of the tensor-core int8 decode (decode_coopmat.glsl as in the tree: V's
fragments from registers, tile pairs) taken out, for timing through FOUNDRY_KERNEL_DIR
(bench/copies_clock_check.sh with CHECKED=""): each computes a wrong output and bounds what removing that
part could gain.
  stream     the loads alone (K, V and the scales, as the plan issues them), folded into the output;
  no-vscale  V's products accumulated in place, unscaled (no shuffle, no multiply);
  no-widen   V's codes taken as f16 bits, not widened;
  no-kscale  the score chunks summed unscaled;
  pt-const   P^T not written to shared memory and read back: a fragment of one of the lane's weights.
And two candidates with right outputs:
  vpre       V's codes times their scale in f16 as they widen into V^T's fragments (a lane's dims lie in
             one scale chunk), its products accumulated in place: no multiply after each product (right
             where V's scales are under 65504 / 127);
  vlate      a tile's next V rows loaded into its ring slot after its V products, not at the start of its
             pair into the slot while a copy of its rows is kept: with four tiles in flight
             (FA_DECODE_UNROLL=4) the copy's 32 registers are what the ring needs.
Usage (from the repository root, before packing): python3 bench/decode_part_copies.py .device/kx [NAME...]
"""
import pathlib
import sys

from decode_kernel_copies import KERNEL, sub, write_copies

tree = pathlib.Path("kernels", KERNEL).read_text()

STAGE_K = ("        kunit[p] = dc_stage_keys(ring[r0 + p], rbase + p * DC_KEYS * DC_ROW4K, "
           "kv_begin > t ? kv_begin - t : 0u);\n")
REST_BEGIN = "      DC_SYNC();\n\n      F32C s[DC_PAIR];\n"
REST_END = "    }\n  }\n\n  // The subgroup's normalised partial"
WIDEN = ("  const f16vec2 row_lo = i8_even_f16(lo), row8_lo = i8_odd_f16(lo), row_hi = i8_even_f16(hi), "
         "row8_hi = i8_odd_f16(hi);")
V_SCALE = "subgroupShuffle(scales.y, sbase[p] + (lane >> 2u) * 16u / KV_BLOCK_DIMS)"
V_SLICE = "          const F16A vt = dc_value_slice(values[p][0], values[p][1], values[p][2], values[p][3], j"
V_PRODUCT = "          o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * sv;"
V_NEXT = "        if (more[p]) dc_load_values(t + round_step, last, b, kv_h, ring[r0 + p]);\n"
P_STORE = ("            dc_tile[pbase + p * DC_KEYS + CM8_ROW_OF[e] + lane_row][lane & 3u] = "
           "dc_pack2(x[p * CM8_ELEMS + e], next);")


def stream(text):
    text = sub(text, STAGE_K, "        kunit[p] = 1.0;\n"
               "        [[unroll]] for (uint j = 0u; j < DC_LOADS_K; ++j) sink ^= ring[r0 + p].k[j];\n")
    head, rest = text.split(REST_BEGIN)
    _, tail = rest.split(REST_END)
    body = """      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
#if DC_VREGS
        [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) sink ^= values[p][j];
#else
        [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) sink ^= ring[r0 + p].v[j];
        if (more[p]) dc_load_values(t0 + (r0 + p) * DC_KEYS + round_step, last, b, kv_h, ring[r0 + p]);
#endif
      }
#if DC_INT8
      sink.x ^= floatBitsToUint(scales.x) ^ floatBitsToUint(scales.y);
#endif
"""
    text = head + body + REST_END + tail
    text = sub(text, "  DcTile ring[DC_RING];\n", "  DcTile ring[DC_RING];\n  uvec4 sink = uvec4(0u);\n")
    return sub(text, "  float inv[2];\n",
               "  l[0] += float((sink.x ^ sink.y ^ sink.z ^ sink.w) & 1u);\n  float inv[2];\n")


def pt_const(text):
    text = sub(text, P_STORE, "            x[p * CM8_ELEMS + e] += next;")
    return sub(text, "        F16B pt;\n        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);\n",
               "        F16B pt = F16B(float16_t(x[p * CM8_ELEMS]));\n", 2)


def vpre(text):
    text = sub(text, "F16A dc_value_slice(uvec4 v0, uvec4 v1, uvec4 v2, uvec4 v3, uint j) {",
               "F16A dc_value_slice(uvec4 v0, uvec4 v1, uvec4 v2, uvec4 v3, uint j, f16vec2 sv) {")
    text = sub(text, WIDEN, "  const f16vec2 row_lo = i8_even_f16(lo) * sv, row8_lo = i8_odd_f16(lo) * sv, "
               "row_hi = i8_even_f16(hi) * sv, row8_hi = i8_odd_f16(hi) * sv;")
    text = sub(text, f"        const float sv = {V_SCALE};",
               f"        const f16vec2 sv = f16vec2(float16_t({V_SCALE}));")
    text = sub(text, V_SLICE + ");", V_SLICE + ", sv);")
    return sub(text, V_PRODUCT, "          o[j] = DC_MMA(vt, pt, o[j]);")


def vlate(text):
    text = sub(text, "        values[p] = ring[r0 + p].v;\n" + V_NEXT, "")
    text = sub(text, "      uvec4 values[DC_PAIR][DC_LOADS_V];  // the pair's V rows, their ring slots taking the "
               "next ones\n", "")
    slot = "ring[r0 + p].v"
    return sub(text, f"{V_SLICE});\n{V_PRODUCT}\n        }}\n",
               f"          const F16A vt = dc_value_slice({slot}[0], {slot}[1], {slot}[2], {slot}[3], j);\n"
               f"{V_PRODUCT}\n        }}\n{V_NEXT}")


copies = {
    "stream": stream(tree),
    "no-vscale": sub(tree, V_PRODUCT, "          o[j] = DC_MMA(vt, pt, o[j]);"),
    "no-widen": sub(tree, WIDEN, "  const f16vec2 row_lo = unpackFloat2x16(lo), row8_lo = unpackFloat2x16(lo ^ 1u), "
                    "row_hi = unpackFloat2x16(hi), row8_hi = unpackFloat2x16(hi ^ 1u);"),
    "no-kscale": sub(tree, "            s[p] = s[p] + F32C(both) * scale;", "            s[p] = s[p] + F32C(both);"),
    "pt-const": pt_const(tree),
    "vpre": vpre(tree),
    "vlate": vlate(tree),
}

if __name__ == "__main__":
    write_copies(sys.argv[1], copies, sys.argv[2:])
