"""Copies of kernels/ with the tensor-core int8 decode's next loads, or its V staging, moved within its
loop (decode_coopmat.glsl with V in halves), for bench/value_schedule_check.sh:
  vearly  half 0's next V loads issued as soon as half 0 is staged;
  vpre    as vearly, and half 0 of both tiles of a pair staged before the softmax, in K's rows;
  klate   K's next rows loaded once the scores are taken, not as K is staged;
  vlate   a tile's next V rows loaded after its second half's products;
  kvlate  klate and vlate.
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

copies = {"vearly": early, "vpre": pre, "klate": klate, "vlate": vlate, "kvlate": kvlate}
names = sys.argv[2:] or list(copies)
for name, text in ((n, copies[n]) for n in names):
    d = root / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    (d / K).write_text(text)
    print("wrote", d / K)
