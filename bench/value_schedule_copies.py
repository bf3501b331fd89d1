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
  vr2a, vr2b  vregs with each slice's fragment built from packed widenings (two keys' bytes of a word merged,
          widened a pair at a time), a tile's next V rows loaded once its products are issued; vr2a takes the
          PTX A operand's element order, vr2b the H200 probe's order for 16x16 f32 accumulators;
  vr2c    vr2b, a tile's next V rows loaded before its slices are built;
  vr2e    vr2b, both tiles' next V rows loaded with their next K rows, at the pair's start (landed as
          FOUNDRY_FA_DECODE_VALUE_REGISTERS);
  vr2f    vr2e with the codes widened to 1152 + code and the offset taken out by one product a tile;
  vr2p    vr2b software-pipelined: pair n's scores beside pair n - 1's V products.
Usage (from the repository root, before packing): python3 bench/value_schedule_copies.py .device/kx [NAME...]
"""
import sys

from decode_kernel_copies import kernel_at, sub, write_copies

# The copies rewrite the kernel as it was at 81aa6c1 (V staged in halves as the plan); with a later build,
# whose plan builds V's fragments in registers, time them with FOUNDRY_FA_DECODE_VALUE_REGISTERS=0.
base = kernel_at("81aa6c1")

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

# vr2a / vr2b: V never staged, as vregs, with each slice's fragment built from packed widenings (two
# keys' bytes of one word merged, then widened a pair at a time: elements (row, 2t) and (row, 2t + 1)
# of a lane share one f16 pair), and the tile's next V rows loaded once its products are issued. The
# two copies differ only in the order of a lane's eight elements of a 16x16 f16 fragment: vr2a takes
# the PTX A operand's (row g, g + 8 alternating by pairs), vr2b the H200 probe's for a 16x16 f32
# accumulator (row g's four first).
def value_registers(rows, cols):
    t = sub(base, """uint dc_vkey(uint j) {""", """#if DC_VHALVES
const uint VR_ROW_OF[8] = %s, VR_COL_OF[8] = %s;
uint dc_vkey(uint j) { return 2u * (gl_SubgroupInvocationID & 3u) + (j & 1u) + 8u * (j >> 1u); }
uint dc_vseg(uint j) { return gl_SubgroupInvocationID >> 2u; }
#else
uint dc_vkey(uint j) {""" % (rows, cols))
    t = sub(t, """uint dc_vseg(uint j) {
  return DC_VHALVES != 0 ? (j % 2u) * DC_HSEGS + (gl_SubgroupInvocationID + SUBGROUP_SIZE * (j / 2u)) % DC_HSEGS
                         : (gl_SubgroupInvocationID + SUBGROUP_SIZE * j) % DC_SEGS_V;
}""", """uint dc_vseg(uint j) {
  return DC_VHALVES != 0 ? (j % 2u) * DC_HSEGS + (gl_SubgroupInvocationID + SUBGROUP_SIZE * (j / 2u)) % DC_HSEGS
                         : (gl_SubgroupInvocationID + SUBGROUP_SIZE * j) % DC_SEGS_V;
}
#endif""")
    t = sub(t, old_v + """
#else""", """        F16B pt;
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        const float sv = subgroupShuffle(scales.y, sbase[p] + (lane >> 3u));
        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
          // Word j / 2 of each of the lane's four keys holds dims 16g + 4(j / 2) + [0, 4); this slice
          // takes bytes 2(j % 2) and 2(j % 2) + 1 (dims 16g + 2j, row g, and 16g + 2j + 1, row g + 8).
          const uint w = j / 2u;
          const uvec4 v0 = ring[r0 + p].v[0], v1 = ring[r0 + p].v[1], v2 = ring[r0 + p].v[2], v3 = ring[r0 + p].v[3];
          const uint lo = j % 2u == 0u ? (v0[w] & 0xffffu) | (v1[w] << 16u) : (v0[w] >> 16u) | (v1[w] & 0xffff0000u);
          const uint hi = j % 2u == 0u ? (v2[w] & 0xffffu) | (v3[w] << 16u) : (v2[w] >> 16u) | (v3[w] & 0xffff0000u);
          const f16vec2 r_lo = i8_even_f16(lo), r8_lo = i8_odd_f16(lo), r_hi = i8_even_f16(hi), r8_hi = i8_odd_f16(hi);
          F16A vt;
          [[unroll]] for (uint e = 0u; e < 8u; ++e) {
            const f16vec2 pr = VR_ROW_OF[e] == 0u ? (VR_COL_OF[e] < 8u ? r_lo : r_hi) : (VR_COL_OF[e] < 8u ? r8_lo : r8_hi);
            vt[e] = (VR_COL_OF[e] & 1u) == 0u ? pr.x : pr.y;
          }
          o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * sv;
        }
        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
        continue;  // nothing staged: no barrier before the next tile
#else""")
    t = sub(t, """        const uint d = DC_DIM(j * 16u + CM8_ROW_OF[e] + lane_row);""",
            """#if DC_INT8 && DC_VHALVES
        const uint r = CM8_ROW_OF[e] + lane_row, d = 16u * (r % 8u) + 2u * j + r / 8u;
#else
        const uint d = DC_DIM(j * 16u + CM8_ROW_OF[e] + lane_row);
#endif""")
    return t
vr2a = value_registers("{0u, 0u, 8u, 8u, 0u, 0u, 8u, 8u}", "{0u, 1u, 0u, 1u, 8u, 9u, 8u, 9u}")
vr2b = value_registers("{0u, 0u, 0u, 0u, 8u, 8u, 8u, 8u}", "{0u, 1u, 8u, 9u, 0u, 1u, 8u, 9u}")

# vr2c: vr2b with the tile's four V loads copied and its next V rows loaded before its slices are built.
# vr2e: vr2b with both tiles' V loads copied and their next V rows loaded as K's next rows are (the
# pair's start).
cur_v = "          const uvec4 v0 = ring[r0 + p].v[0], v1 = ring[r0 + p].v[1], v2 = ring[r0 + p].v[2], v3 = ring[r0 + p].v[3];\n"
late_load = "        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n        continue;"
vr2c = sub(vr2b, cur_v, "")
vr2c = sub(vr2c, "        const float sv = subgroupShuffle(scales.y, sbase[p] + (lane >> 3u));\n",
           "        const float sv = subgroupShuffle(scales.y, sbase[p] + (lane >> 3u));\n"
           + cur_v.replace("          ", "        ", 1)
           + "        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n")
vr2c = sub(vr2c, late_load, "        continue;")
vr2e = sub(vr2b, cur_v, "          const uvec4 v0 = cur[p][0], v1 = cur[p][1], v2 = cur[p][2], v3 = cur[p][3];\n")
vr2e = sub(vr2e, late_load, "        continue;")
vr2e = sub(vr2e, "        if (more[p]) dc_load_keys(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n",
           "        if (more[p]) dc_load_keys(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n"
           "#if DC_INT8 && DC_VHALVES\n"
           "        cur[p] = ring[r0 + p].v;\n"
           "        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n"
           "#endif\n")
vr2e = sub(vr2e, "      bool more[DC_PAIR];\n", "      bool more[DC_PAIR];\n#if DC_INT8 && DC_VHALVES\n      uvec4 cur[DC_PAIR][DC_LOADS_V];\n#endif\n")
# vr2f: vr2e with V's codes widened to 1152 + code (bits only, no packed subtraction); the tile's
# -1152 * (P's column sums) comes from one more product (a constant A of -1152) and is added, scaled
# by the lane's V scale, to an accumulator of its own that every slice takes at the end.
vr2f = sub(vr2e, "const f16vec2 r_lo = i8_even_f16(lo), r8_lo = i8_odd_f16(lo), r_hi = i8_even_f16(hi), r8_hi = i8_odd_f16(hi);",
           "const f16vec2 r_lo = i8_biased_f16(lo), r8_lo = i8_biased_f16(lo >> 8u), r_hi = i8_biased_f16(hi), r8_hi = i8_biased_f16(hi >> 8u);")
vr2f = sub(vr2f, "        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {\n          // Word j / 2",
           "        vbias = vbias + DC_MMA(F16A(float16_t(-1152.0)), pt, F32C(0.0)) * sv;\n"
           "        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {\n          // Word j / 2")
vr2f = sub(vr2f, "  F32C o[DC_DV];\n", "  F32C o[DC_DV];\n  F32C vbias = F32C(0.0);  // vr2f: -1152 * sv * P's column sums, every slice's\n")
vr2f = sub(vr2f, "        [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) o[j][e] *= alpha[CM8_COL_OF[e]];\n",
           "        [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) o[j][e] *= alpha[CM8_COL_OF[e]];\n      }\n"
           "      [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) {\n        vbias[e] *= alpha[CM8_COL_OF[e]];\n")
vr2f = sub(vr2f, "  // The subgroup's normalised partial of each real head",
           "  [[unroll]] for (uint j = 0u; j < DC_DV; ++j) o[j] = o[j] + vbias;\n  // The subgroup's normalised partial of each real head")
vr2f = sub(vr2f, "#if DC_VHALVES\nconst uint VR_ROW_OF",
           "// 1024 + 128 + code, exactly, for bytes 0 and 2 of w.\n"
           "f16vec2 i8_biased_f16(uint w) { return unpackFloat2x16(((w ^ 0x00800080u) & 0x00ff00ffu) | 0x64006400u); }\n"
           "#if DC_VHALVES\nconst uint VR_ROW_OF")

# vr2p: vr2b software-pipelined: a round stages pair n's K and takes its scores, then runs pair n - 1's
# V products (its P^T loaded at the round's start, its V rows in the ring), then loads pair n's V rows in
# their place and runs pair n's softmax; the last pair's V products follow the loop. The scores of a
# pair and the previous pair's products are independent, so their latencies overlap. Written for the
# plan's int8 rows of 128 (one pair a round: DC_RING == DC_PAIR).
pipe_loop = """#if DC_INT8 && DC_VHALVES
  float svp[DC_PAIR];  // each tile's V scale of this lane's chunk, for the products a round later
  uint tp0 = first;    // the first tile of the pair whose V products are due
  for (uint t0 = first; t0 < kv_end; t0 += DC_PAIR * stride) {
    const bool prev = t0 != first;
    F16B pt[DC_PAIR];
    if (prev) {
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) DC_LOAD_ROWS(pt[p], pbase + p * DC_KEYS, 1u);
    }
    uint sbase[DC_PAIR], vseq[DC_PAIR];
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
      const uint t = t0 + p * stride;
      dc_stage_keys(ring[p], rbase + p * DC_KEYS * DC_ROW4K, kv_begin > t ? kv_begin - t : 0u);
      const uint slot = ((t - first) / stride) % DC_STILES;
      if (slot == 0u && t != first) {
        scales = scales_next;
        if (t + DC_STILES * stride < kv_end) scales_next = dc_load_scales(t + DC_STILES * stride, stride, last, b, kv_h);
      }
      sbase[p] = slot * DC_SCHUNKS;
      vseq[p] = ring[p].seq;
      if (t + DC_PAIR * stride < kv_end) dc_load_keys(t + DC_PAIR * stride, last, b, kv_h, ring[p]);
    }
    DC_SYNC();

    F32C s[DC_PAIR];
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
      const uint kbase = rbase + p * DC_KEYS * DC_ROW4K;
      s[p] = F32C(0.0);
      [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) {
        I8A kc;
        DC_LOAD_ROWS(kc, kbase + c * 2u, DC_ROW4K);
        const float scale = subgroupShuffle(scales.x, sbase[p] + c);
        if (DC_QCOLS) {
          const I32C both = DC_MMA(kc, q_hi[c], I32C(0));
          s[p] = s[p] + F32C(both) * scale;
        } else {
          const I32C hi = DC_MMA(kc, q_hi[c], I32C(0)), lo = DC_MMA(kc, q_lo[c], I32C(0));
          s[p] = s[p] + F32C(hi * 128 + lo) * scale;
        }
      }
    }

    if (prev) {
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) DC_REG_VALUE_PRODUCTS(ring[p].v, pt[p], svp[p]);
    }
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
      const uint t = t0 + p * stride;
      if (t < kv_end) dc_load_values_at(vseq[p], t, last, kv_h, ring[p].v);
      svp[p] = subgroupShuffle(scales.y, sbase[p] + (lane >> 3u));
    }
    tp0 = t0;

    float x[DC_PAIR * CM8_ELEMS];
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
      [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) {
        const uint key = t0 + p * stride + CM8_ROW_OF[e] + lane_row, col = CM8_COL_OF[e] + lane_col;
        const uint h = h0 + min(col, DECODE_HEADS - 1u), at = min(key, last);
        const float raw = DC_QCOLS ? s[p][e] * 128.0 + subgroupShuffleXor(s[p][e], 2u) : s[p][e];
        float v = raw * unit[CM8_COL_OF[e]];
        if (FA_SCORE_CHANGED) v = fa_score_log2(v, b, h, q_pos, at);
        const bool valid = col < DECODE_HEADS && key >= kv_begin && key < kv_end && (exact || fa_visible(b, h, q_pos, at));
        x[p * CM8_ELEMS + e] = valid ? v : NEG_BIG;
      }
    }
    bool passed = false;
    [[unroll]] for (uint i = 0u; i < DC_PAIR * CM8_ELEMS; ++i) passed = passed || x[i] > m[CM8_COL_OF[i % CM8_ELEMS]] + DC_HEADROOM;
    if (subgroupAny(passed)) {
      float alpha[2];
      [[unroll]] for (uint c = 0u; c < 2u; ++c) {
        float mx = NEG_BIG;
        [[unroll]] for (uint i = 0u; i < DC_PAIR * CM8_ELEMS; ++i) mx = CM8_COL_OF[i % CM8_ELEMS] == c ? max(mx, x[i]) : mx;
        mx = max(mx, subgroupShuffleXor(mx, 4u));
        mx = max(mx, subgroupShuffleXor(mx, 8u));
        mx = max(mx, subgroupShuffleXor(mx, 16u));
        const float m_new = max(m[c], mx);
        alpha[c] = exp2(m[c] - m_new);
        m[c] = m_new;
        l[c] *= alpha[c];
      }
      [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
        [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) o[j][e] *= alpha[CM8_COL_OF[e]];
      }
    }
    [[unroll]] for (uint i = 0u; i < DC_PAIR * CM8_ELEMS; ++i) {
      x[i] = x[i] > 0.5 * NEG_BIG ? exp2(x[i] - m[CM8_COL_OF[i % CM8_ELEMS]]) : 0.0;
      l[CM8_COL_OF[i % CM8_ELEMS]] += x[i];
    }
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
      [[unroll]] for (uint e = 0u; e < CM8_ELEMS; ++e) {
        if (CM8_COL_OF[e] == 0u) {
          float next = 0.0;
          [[unroll]] for (uint f = 0u; f < CM8_ELEMS; ++f) {
            next = CM8_ROW_OF[f] == CM8_ROW_OF[e] && CM8_COL_OF[f] == 1u ? x[p * CM8_ELEMS + f] : next;
          }
          dc_tile[pbase + p * DC_KEYS + CM8_ROW_OF[e] + lane_row][lane & 3u] = dc_pack2(x[p * CM8_ELEMS + e], next);
        }
      }
    }
    DC_SYNC();  // K's rows read before the next pair's take their place; P^T written before it is loaded
  }
  if (first < kv_end) {
    F16B pt[DC_PAIR];
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) DC_LOAD_ROWS(pt[p], pbase + p * DC_KEYS, 1u);
    [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
      if (tp0 + p * stride < kv_end) DC_REG_VALUE_PRODUCTS(ring[p].v, pt[p], svp[p]);
    }
  }
#else
"""
reg_products = r"""
#if DC_INT8 && DC_VHALVES
// V's rows of the tile at t into v, through the page lookup seq (made as its K rows were loaded).
void dc_load_values_at(uint seq, uint t, uint last, uint kv_h, inout uvec4 v[DC_LOADS_V]) {
  [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) {
    v[j] = dc_load_v(kv_v_row_in(seq, kv_h, min(t + dc_vkey(j), last)), dc_vseg(j) * KV_WIDTH);
  }
}
// O^T += V^T P^T * sv, V^T's fragments built from a tile's four loads (vr2b's layout).
#define DC_REG_VALUE_PRODUCTS(vr, ptile, sv)                                                                       \
  [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {                                                                   \
    const uint w = j / 2u;                                                                                         \
    const uint lo = j % 2u == 0u ? (vr[0][w] & 0xffffu) | (vr[1][w] << 16u) : (vr[0][w] >> 16u) | (vr[1][w] & 0xffff0000u); \
    const uint hi = j % 2u == 0u ? (vr[2][w] & 0xffffu) | (vr[3][w] << 16u) : (vr[2][w] >> 16u) | (vr[3][w] & 0xffff0000u); \
    const f16vec2 r_lo = i8_even_f16(lo), r8_lo = i8_odd_f16(lo), r_hi = i8_even_f16(hi), r8_hi = i8_odd_f16(hi); \
    F16A vt;                                                                                                       \
    [[unroll]] for (uint e = 0u; e < 8u; ++e) {                                                                    \
      const f16vec2 pr = VR_ROW_OF[e] == 0u ? (VR_COL_OF[e] < 8u ? r_lo : r_hi) : (VR_COL_OF[e] < 8u ? r8_lo : r8_hi); \
      vt[e] = (VR_COL_OF[e] & 1u) == 0u ? pr.x : pr.y;                                                             \
    }                                                                                                              \
    o[j] = o[j] + DC_MMA(vt, ptile, F32C(0.0)) * sv;                                                               \
  }
#endif
"""
vr2p = sub(vr2b, "#define DC_SYNC()", reg_products + "\n#define DC_SYNC()")
vr2p = sub(vr2p, """      dc_load_values(first + r * stride, last, b, kv_h, ring[r]);
""", """#if !(DC_INT8 && DC_VHALVES)
      dc_load_values(first + r * stride, last, b, kv_h, ring[r]);
#endif
""")
vr2p = sub(vr2p, "  for (uint t0 = first; t0 < kv_end; t0 += DC_RING * stride) {\n", pipe_loop + "  for (uint t0 = first; t0 < kv_end; t0 += DC_RING * stride) {\n")
vr2p = sub(vr2p, """        DC_SYNC();  // every lane has read V and P^T before the next tile's rows take their places
      }
    }
  }
""", """        DC_SYNC();  // every lane has read V and P^T before the next tile's rows take their places
      }
    }
  }
#endif
""")

copies = {"vearly": early, "vpre": pre, "klate": klate, "vlate": vlate, "kvlate": kvlate, "vregs": vregs, "vr2a": vr2a, "vr2b": vr2b, "vr2c": vr2c, "vr2e": vr2e, "vr2p": vr2p, "vr2f": vr2f}
write_copies(sys.argv[1], copies, sys.argv[2:])
