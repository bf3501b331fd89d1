"""Copies of kernels/ with the tensor-core int8 decode changed, for bench/copies_clock_check.sh (COPIES):
  fill    the first tiles' loads (and the scales') issued at the top of flash_decode_coopmat, ahead of Q's
          staging, not after it;
  sc1     a pair's K and V scales shuffled once for both tiles (a pair lies in one scale block), not per tile;
  fillsc  both.
These rewrite the kernel as committed at b91fe53. With bench/patches/decode_int8_key_registers.diff applied to
the tree (K's fragments from registers, DC_KREGS), two more rewrite the tree's kernel:
  kearly  a tile's next K rows loaded at the start of its pair (a copy of the pair's K codes kept for its
          scores), not after its scores;
  kglobal K's fragments loaded by coopMatLoadNV straight from k_cache, 16 rows a tile (a timing copy: its
          element offsets are wrong, and a tile past the last key reads past it).
Usage (from the repository root, before packing): python3 bench/decode_start_copies.py .device/kx [NAME...]
"""
import pathlib
import sys

from decode_kernel_copies import KERNEL, kernel_at, sub, write_copies

base = kernel_at("b91fe53")

fill_text = """  const uint last = kv_end - 1u;
  const bool exact = fa_keys_exact(keys, kv_begin, kv_end);
  const uint first = kv_begin - kv_begin % (DC_RING * DC_KEYS) + sg * DC_RING * DC_KEYS;
  const uint round_step = DECODE_WARPS * DC_RING * DC_KEYS;  // a subgroup's next round of adjacent tiles
  DcTile ring[DC_RING];
#if DC_INT8
  // This group's scales, and the next group's, loaded a group ahead.
  vec2 scales = dc_load_scales(first, round_step, last, b, kv_h);
  vec2 scales_next = dc_load_scales(first + DC_STILES / DC_RBLOCKS * round_step, round_step, last, b, kv_h);
#endif
  [[unroll]] for (uint r = 0u; r < DC_RING; ++r) {
    if (first + r * DC_KEYS < kv_end) {
      dc_load_keys(first + r * DC_KEYS, last, b, kv_h, ring[r]);
      dc_load_values(first + r * DC_KEYS, last, b, kv_h, ring[r]);
    }
  }
"""


def fill(text):
    text = sub(text, fill_text, "")
    return sub(text, "  const uint lane_row = lane >> 2u, lane_col = 2u * (lane & 3u);\n",
               "  const uint lane_row = lane >> 2u, lane_col = 2u * (lane & 3u);\n"
               "  // The first tiles' loads ahead of Q's staging.\n" + fill_text)


def sc1(text):
    text = sub(text, """      F32C s[DC_PAIR];
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {""", """      F32C s[DC_PAIR];
#if DC_INT8
      // A pair's tiles lie in one scale block: its scales shuffled once.
      const bool one_block = DC_PAIR * DC_KEYS <= KV_BLOCK_KEYS;
      float ksc[DC_CHUNKS_K];
      [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) ksc[c] = subgroupShuffle(scales.x, sbase[0] + c);
      const float sv0 = subgroupShuffle(scales.y, sbase[0] + (lane >> 2u) * 16u / KV_BLOCK_DIMS);
#endif
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {""")
    text = sub(text, "          const float scale = subgroupShuffle(scales.x, sbase[p] + c);",
               "          const float scale = one_block ? ksc[c] : subgroupShuffle(scales.x, sbase[p] + c);")
    return sub(text, "        const float sv = subgroupShuffle(scales.y, sbase[p] + (lane >> 2u) * 16u / KV_BLOCK_DIMS);",
               "        const float sv = one_block ? sv0 : subgroupShuffle(scales.y, sbase[p] + (lane >> 2u) * 16u / "
               "KV_BLOCK_DIMS);")


copies = {"fill": fill(base), "sc1": sc1(base), "fillsc": sc1(fill(base))}

tree = pathlib.Path("kernels", KERNEL).read_text()
if "DC_KREGS" in tree:
    kearly = sub(tree, """#if !DC_KREGS
        if (more[p]) dc_load_keys(t + round_step, last, b, kv_h, ring[r0 + p]);
#endif""", """#if DC_KREGS
        keys_now[p] = ring[r0 + p].k;
#endif
        if (more[p]) dc_load_keys(t + round_step, last, b, kv_h, ring[r0 + p]);""")
    kearly = sub(kearly, """      uvec4 values[DC_PAIR][DC_LOADS_V];  // the pair's V rows, their ring slots taking the next ones
#endif""", """      uvec4 values[DC_PAIR][DC_LOADS_V];  // the pair's V rows, their ring slots taking the next ones
#endif
#if DC_KREGS
      uvec4 keys_now[DC_PAIR][DC_LOADS_K];
#endif""")
    kearly = sub(kearly, "          const I8A kc = dc_key_chunk(ring[r0 + p].k[c]);",
                 "          const I8A kc = dc_key_chunk(keys_now[p][c]);")
    copies["kearly"] = sub(kearly, """#if DC_KREGS
        if (more[p]) dc_load_keys(t0 + (r0 + p) * DC_KEYS + round_step, last, b, kv_h, ring[r0 + p]);
#endif""", "")
    kglobal = sub(tree, """  DcTile ring[DC_RING];
  uint pairs = 0u;""", """  DcTile ring[DC_RING];
#if DC_KREGS
  I8A kring[DC_RING][DC_CHUNKS_K];
#endif
#define DC_LOAD_KFRAGS(t, r)                                                                          \\
  {                                                                                                   \\
    const uint kb = kv_k_row_in(kv_seq(b, t), kv_h, t).x;                                             \\
    [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c)                                                \\
      coopMatLoadNV(kring[r][c], k_cache, (kb + c * 32u) / 8u, pc.k_stride_s / 8u, false);            \\
  }
  uint pairs = 0u;""")
    kglobal = sub(kglobal, """      if (DC_KREGS != 0) dc_load_values(first + r * DC_KEYS, last, b, kv_h, ring[r]);
      dc_load_keys(first + r * DC_KEYS, last, b, kv_h, ring[r]);""", """      if (DC_KREGS != 0) dc_load_values(first + r * DC_KEYS, last, b, kv_h, ring[r]);
#if DC_KREGS
      DC_LOAD_KFRAGS(first + r * DC_KEYS, r);
#else
      dc_load_keys(first + r * DC_KEYS, last, b, kv_h, ring[r]);
#endif""")
    kglobal = sub(kglobal, "          const I8A kc = dc_key_chunk(ring[r0 + p].k[c]);", "          const I8A kc = kring[r0 + p][c];")
    copies["kglobal"] = sub(kglobal, "        if (more[p]) dc_load_keys(t0 + (r0 + p) * DC_KEYS + round_step, last, b, kv_h, ring[r0 + p]);",
                            "        if (more[p]) DC_LOAD_KFRAGS(t0 + (r0 + p) * DC_KEYS + round_step, r0 + p);")

write_copies(sys.argv[1], copies, sys.argv[2:])
