"""Copies of kernels/ with the tensor-core int8 decode's next loads, or its V staging, moved within its
loop (decode_coopmat.glsl with V in halves), for bench/value_schedule_check.sh:
  vearly  half 0's next V loads issued as soon as half 0 is staged;
  vpre    as vearly, and half 0 of both tiles of a pair staged before the softmax, in K's rows;
  klate   K's next rows loaded once the scores are taken, not as K is staged;
  vlate   a tile's next V rows loaded after its second half's products;
  kvlate  klate and vlate;
  vregs   V never staged: each lane loads the rows and dims its f16 A fragments of V^T hold (keys 2q, 2q + 1,
          2q + 8, 2q + 9 and dims [16g, 16g + 16) for lane 4g + q, O^T's rows permuted to match), widens the
          codes into the fragments' elements, and scales the products by its one chunk's V scale.
Usage (from the repository root, before packing): python3 bench/value_schedule_copies.py .device/kx [NAME...]
"""
import pathlib
import shutil
import sys

root = pathlib.Path(sys.argv[1])
src = pathlib.Path("kernels")
K = "flashattention/decode_coopmat.glsl"
base = (src / K).read_text()

def sub(text, old, new, count=1):
    assert text.count(old) == count, (old[:60], text.count(old))
    return text.replace(old, new)

half_loader = '''
// Half h of V's rows of the tile at t: loads h and h + 2.
void dc_load_value_half(uint t, uint last, uint b, uint kv_h, inout DcTile x, uint h) {
  [[unroll]] for (uint j = h; j < DC_LOADS_V; j += 2u) {
    const uint key = min(t + dc_vkey(j), last);
    x.v[j] = dc_load_v(kv_v_row_in(x.seq, kv_h, key), dc_vseg(j) * KV_WIDTH);
  }
}
'''
def with_loader(t):
    at = "// Stages a tile's K rows as loaded"
    return sub(t, at, half_loader + "\n" + at)

old_v = '''        F16B pt;
        dc_stage_value_half(ring[r0 + p].v[0], ring[r0 + p].v[2], rbase, 0u);
        DC_SYNC();
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        DC_VALUE_PRODUCTS(0u, DC_DV / 2u);
        DC_SYNC();
        dc_stage_value_half(ring[r0 + p].v[1], ring[r0 + p].v[3], rbase, 1u);
        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
        DC_SYNC();
        DC_VALUE_PRODUCTS(DC_DV / 2u, DC_DV);'''

# vearly: half 0's next loads go out as soon as half 0 is staged.
early = with_loader(base)
early = sub(early, old_v, '''        F16B pt;
        dc_stage_value_half(ring[r0 + p].v[0], ring[r0 + p].v[2], rbase, 0u);
        if (more[p]) dc_load_value_half(t + DC_RING * stride, last, b, kv_h, ring[r0 + p], 0u);
        DC_SYNC();
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        DC_VALUE_PRODUCTS(0u, DC_DV / 2u);
        DC_SYNC();
        dc_stage_value_half(ring[r0 + p].v[1], ring[r0 + p].v[3], rbase, 1u);
        if (more[p]) dc_load_value_half(t + DC_RING * stride, last, b, kv_h, ring[r0 + p], 1u);
        DC_SYNC();
        DC_VALUE_PRODUCTS(DC_DV / 2u, DC_DV);''')

# vpre: as vearly, and half 0 of every tile of the pair staged (tile p in K's rows of tile p) as soon
# as the scores are taken, before the softmax; its products then read it there.
pre = with_loader(base)
pre = sub(pre, "DC_LOAD_COLS(vt, rbase + (j - (first)) * 2u, DC_ROW4V);",
          "DC_LOAD_COLS(vt, vrows + (j - (first)) * 2u, DC_ROW4V);")
pre = sub(pre, '''      // The softmax on this lane's elements of the DC_PAIR tiles''', '''#if DC_INT8 && DC_VHALVES
      DC_SYNC();  // every lane has read K's rows: half 0 of tile p's V takes tile p's K rows
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint t = t0 + (r0 + p) * stride;
        if (t < kv_end) {
          dc_stage_value_half(ring[r0 + p].v[0], ring[r0 + p].v[2], rbase + p * DC_KEYS * DC_ROW4K, 0u);
          if (more[p]) dc_load_value_half(t + DC_RING * stride, last, b, kv_h, ring[r0 + p], 0u);
        }
      }
#endif
      // The softmax on this lane's elements of the DC_PAIR tiles''')
pre = sub(pre, old_v, '''        F16B pt;
        const uint vrows = rbase + p * DC_KEYS * DC_ROW4K;
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        DC_VALUE_PRODUCTS(0u, DC_DV / 2u);
        DC_SYNC();
        dc_stage_value_half(ring[r0 + p].v[1], ring[r0 + p].v[3], vrows, 1u);
        if (more[p]) dc_load_value_half(t + DC_RING * stride, last, b, kv_h, ring[r0 + p], 1u);
        DC_SYNC();
        DC_VALUE_PRODUCTS(DC_DV / 2u, DC_DV);''')
whole_v = "        const float vunit = dc_stage_values(ring[r0 + p], rbase, kv_begin > t ? kv_begin - t : 0u);"
pre = sub(pre, whole_v, "        const uint vrows = rbase;\n" + whole_v)

# klate: K's next rows loaded once the scores are taken (before the softmax), not as K is staged.
k_reload = "        if (more[p]) dc_load_keys(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n"
klate = sub(base, k_reload, "")
softmax = "      // The softmax on this lane's elements of the DC_PAIR tiles"
klate = sub(klate, softmax, """      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint t = t0 + (r0 + p) * stride;
        if (more[p]) dc_load_keys(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
      }
""" + softmax)
# vlate: a tile's next V rows loaded after its second half's products.
v_late = """        DC_SYNC();
        DC_VALUE_PRODUCTS(DC_DV / 2u, DC_DV);"""
def late_values(t):
    t = sub(t, """        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
""" + v_late, v_late + """
        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);""")
    return t
vlate = late_values(base)
kvlate = late_values(klate)

# vregs (the quad layout of a 16x16 fragment, as the probe finds the f32 one on the H200: element e at
# row VR_ROW_OF[e] + lane / 4, column VR_COL_OF[e] + 2 * (lane % 4)).
vregs = sub(base, """uint dc_vkey(uint j) {""", """#if DC_VHALVES
const uint VR_ROW_OF[8] = {0u, 0u, 8u, 8u, 0u, 0u, 8u, 8u}, VR_COL_OF[8] = {0u, 1u, 0u, 1u, 8u, 9u, 8u, 9u};
uint dc_vkey(uint j) { return 2u * (gl_SubgroupInvocationID & 3u) + (j & 1u) + 8u * (j >> 1u); }
uint dc_vseg(uint j) { return gl_SubgroupInvocationID >> 2u; }
#else
uint dc_vkey(uint j) {""")
vregs = sub(vregs, """uint dc_vseg(uint j) {
  return DC_VHALVES != 0 ? (j % 2u) * DC_HSEGS + (gl_SubgroupInvocationID + SUBGROUP_SIZE * (j / 2u)) % DC_HSEGS
                         : (gl_SubgroupInvocationID + SUBGROUP_SIZE * j) % DC_SEGS_V;
}""", """uint dc_vseg(uint j) {
  return DC_VHALVES != 0 ? (j % 2u) * DC_HSEGS + (gl_SubgroupInvocationID + SUBGROUP_SIZE * (j / 2u)) % DC_HSEGS
                         : (gl_SubgroupInvocationID + SUBGROUP_SIZE * j) % DC_SEGS_V;
}
#endif""")
vregs = sub(vregs, old_v + """
#else""", """        F16B pt;
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        const float sv = subgroupShuffle(scales.y, sbase[p] + (lane >> 3u));
        const uvec4 cur0 = ring[r0 + p].v[0], cur1 = ring[r0 + p].v[1], cur2 = ring[r0 + p].v[2];
        const uvec4 cur3 = ring[r0 + p].v[3];
        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
          F16A vt = F16A(float16_t(0.0));
          [[unroll]] for (uint e = 0u; e < 8u; ++e) {
            const uint L = (VR_COL_OF[e] & 1u) + 2u * (VR_COL_OF[e] >> 3u), at = 2u * j + VR_ROW_OF[e] / 8u;
            const uvec4 r = L == 0u ? cur0 : L == 1u ? cur1 : L == 2u ? cur2 : cur3;
            vt[e] = float16_t(float(bitfieldExtract(int(r[at / 4u]), int(8u * (at % 4u)), 8)));
          }
          const F32C prod = DC_MMA(vt, pt, F32C(0.0));
          [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) o[j][e] += prod[e] * sv;
        }
        continue;  // nothing staged: no barrier before the next tile
#else""")
vregs = sub(vregs, """        const uint d = DC_DIM(j * 16u + CM8_ROW_OF[e] + lane_row);""",
            """#if DC_INT8 && DC_VHALVES
        const uint r = CM8_ROW_OF[e] + lane_row, d = 16u * (r % 8u) + 2u * j + r / 8u;
#else
        const uint d = DC_DIM(j * 16u + CM8_ROW_OF[e] + lane_row);
#endif""")

copies = {"vearly": early, "vpre": pre, "klate": klate, "vlate": vlate, "kvlate": kvlate, "vregs": vregs}
names = sys.argv[2:] or list(copies)
for name, text in ((n, copies[n]) for n in names):
    d = root / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    (d / K).write_text(text)
    print("wrote", d / K)
