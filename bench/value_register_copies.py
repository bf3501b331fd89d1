"""Copies of kernels/ with the tensor-core int8 decode's V built in registers (FOUNDRY_FA_DECODE_VALUE_REGISTERS,
decode_coopmat.glsl's DC_VREGS) changed, for bench/value_schedule_check.sh (COPIES):
  vfirst  a tile's next V rows loaded before its K rows are staged and its next K rows loaded.
  adj     a pair's two tiles adjacent (keys [t, t + 32), one scale block), pairs a subgroup apart by a round
          of DECODE_WARPS * 32 keys, one scale load a pair;
  adjc    adj, with the pair's one scale a chunk shuffled once for both tiles' scores, and both tiles'
          V products chained in one accumulator before the scale (one multiply-add per element a pair).
Usage (from the repository root, before packing): python3 bench/value_register_copies.py .device/kx [NAME...]
"""
import sys

from decode_kernel_copies import kernel_at, sub, write_copies

# The copies rewrite the kernel as it was at 89892e5 (V from registers, a subgroup's tiles a subgroup apart);
# `adj` is what landed after it.
base = kernel_at("89892e5")


regs_loads = """#if DC_VREGS
        values[p] = ring[r0 + p].v;
        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
#endif
"""
vfirst = sub(base, regs_loads, "")
vfirst = sub(vfirst, "        more[p] = t + DC_RING * stride < kv_end;\n", """        more[p] = t + DC_RING * stride < kv_end;
#if DC_VREGS
        values[p] = ring[r0 + p].v;
        if (more[p]) {
          ring[r0 + p].seq = kv_seq(b, t + DC_RING * stride);
          dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
        }
#endif
""")

adj = base
adj = sub(adj, "  const uint first = kv_begin - kv_begin % DC_KEYS + sg * DC_KEYS;\n",
          "  const uint first = kv_begin - kv_begin % (DC_RING * DC_KEYS) + sg * DC_RING * DC_KEYS;\n"
          "  const uint pair_step = DECODE_WARPS * DC_RING * DC_KEYS;  // a subgroup's next pair\n")
adj = sub(adj, "  const uint stride = DECODE_WARPS * DC_KEYS;\n", "  const uint stride = DC_KEYS;  // the pair's second tile\n")
adj = sub(adj, """  vec2 scales = dc_load_scales(first, stride, last, b, kv_h);
  vec2 scales_next = dc_load_scales(first + DC_STILES * stride, stride, last, b, kv_h);""",
"""  vec2 scales = dc_load_scales(first, pair_step, last, b, kv_h);
  vec2 scales_next = dc_load_scales(first + DC_STILES * pair_step, pair_step, last, b, kv_h);""")
adj = sub(adj, "  for (uint t0 = first; t0 < kv_end; t0 += DC_RING * stride) {", "  for (uint t0 = first; t0 < kv_end; t0 += pair_step) {")
adj = sub(adj, "        more[p] = t + DC_RING * stride < kv_end;", "        more[p] = t + pair_step < kv_end;")
adj = sub(adj, """        const uint slot = ((t - first) / stride) % DC_STILES;
        if (slot == 0u && t != first) {
          scales = scales_next;
          if (t + DC_STILES * stride < kv_end) scales_next = dc_load_scales(t + DC_STILES * stride, stride, last, b, kv_h);
        }""", """        const uint slot = ((t0 - first) / pair_step) % DC_STILES;
        if (slot == 0u && t0 != first && r0 + p == 0u) {
          scales = scales_next;
          if (t0 + DC_STILES * pair_step < kv_end) scales_next = dc_load_scales(t0 + DC_STILES * pair_step, pair_step, last, b, kv_h);
        }""")
adj = sub(adj, "        if (more[p]) dc_load_keys(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);",
          "        if (more[p]) dc_load_keys(t + pair_step, last, b, kv_h, ring[r0 + p]);")
adj = sub(adj, "        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);\n#endif\n      }\n      DC_SYNC();",
          "        if (more[p]) dc_load_values(t + pair_step, last, b, kv_h, ring[r0 + p]);\n#endif\n      }\n      DC_SYNC();")
adj = adj.replace("t + DC_RING * stride", "t + pair_step")  # the staged paths' next V loads
assert "DC_RING * stride" not in adj.split("for (uint t0 = first")[1].split("The subgroup's normalised partial")[0]

adjc = sub(adj, "          const float scale = subgroupShuffle(scales.x, sbase[p] + c);",
           "          const float scale = kscale[c];")
adjc = sub(adjc, """      F32C s[DC_PAIR];
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint kbase""", """      F32C s[DC_PAIR];
#if DC_INT8
      float kscale[DC_CHUNKS_K];  // the pair's one scale block
      [[unroll]] for (uint c = 0u; c < DC_CHUNKS_K; ++c) kscale[c] = subgroupShuffle(scales.x, sbase[0] + c);
#endif
      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint kbase""")
adjc = sub(adjc, """#if DC_VREGS
        F16B pt;
        DC_LOAD_ROWS(pt, pbase + p * DC_KEYS, 1u);
        const float sv = subgroupShuffle(scales.y, sbase[p] + (lane >> 2u) * 16u / KV_BLOCK_DIMS);
        [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
          const F16A vt = dc_value_slice(values[p][0], values[p][1], values[p][2], values[p][3], j);
          o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * sv;
        }
#elif""", """#if DC_VREGS
        if (p == 0u) {  // both tiles (a tile past the range has P 0 and finite codes)
          F16B pt0, pt1;
          DC_LOAD_ROWS(pt0, pbase, 1u);
          DC_LOAD_ROWS(pt1, pbase + (DC_PAIR - 1u) * DC_KEYS, 1u);
          const float sv = subgroupShuffle(scales.y, sbase[0] + (lane >> 2u) * 16u / KV_BLOCK_DIMS);
          [[unroll]] for (uint j = 0u; j < DC_DV; ++j) {
            F32C acc = DC_MMA(dc_value_slice(values[0][0], values[0][1], values[0][2], values[0][3], j), pt0, F32C(0.0));
            const uint q1 = DC_PAIR - 1u;
            if (DC_PAIR == 2u) acc = DC_MMA(dc_value_slice(values[q1][0], values[q1][1], values[q1][2], values[q1][3], j), pt1, acc);
            o[j] = o[j] + acc * sv;
          }
        }
#elif""")

copies = {"vfirst": vfirst, "adj": adj, "adjc": adjc}
write_copies(sys.argv[1], copies, sys.argv[2:])
