#!/usr/bin/env python3
"""Copies of kernels/ whose tensor-core decode loop (decode_coopmat.glsl) keeps only part of its work,
for timing through FOUNDRY_KERNEL_DIR (bench/h200.sh tensor-decode copies). Each computes a wrong
output for its time only.
  stream: the loads alone, each tile's words folded into one value that the output depends on: the
          time this load structure reads the cache in.
  stage:  the loads, K's and V's rows staged as loaded a tile at a time, one word of each read back,
          four subgroup barriers a tile: the stream and the shared-memory round trips, without
          products or softmax.
Usage: decode_loop_copies.py ROOT (writes ROOT/stream and ROOT/stage)."""
import shutil
import sys
from pathlib import Path

KERNEL = "flashattention/decode_coopmat.glsl"
BEGIN = "      if (t0 + r0 * stride >= kv_end) break;\n"
END = ("        DC_SYNC();  // every lane has read V and P^T before the next tile's rows take their places\n"
       "#endif\n"
       "      }\n")
# Each of the DC_PAIR tiles of a pass in turn, tile t in ring slot r0 + p; the next loads as the plan's.
TILE = """      [[unroll]] for (uint p = 0u; p < DC_PAIR; ++p) {
        const uint t = t0 + (r0 + p) * stride;
        if (t >= kv_end) break;
        const bool more = t + DC_RING * stride < kv_end;
"""
NEXT = "t + DC_RING * stride, last, b, kv_h, ring[r0 + p]"
BODIES = {
    "stream": TILE + f"""        [[unroll]] for (uint j = 0u; j < DC_LOADS_K; ++j) sink ^= ring[r0 + p].k[j];
        [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) sink ^= ring[r0 + p].v[j];
        if (more) {{
          dc_load_keys({NEXT});
          dc_load_values({NEXT});
        }}
      }}
""",
    "stage": TILE + f"""        dc_stage_keys(ring[r0 + p], rbase, 0u);
        if (more) dc_load_keys({NEXT});
        DC_SYNC();
        sink ^= dc_tile[rbase + lane];
        DC_SYNC();
        [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) {{
          const uint g = lane + SUBGROUP_SIZE * j;
          dc_tile[rbase + (g / DC_SEGS_V) * DC_ROW4V + (g % DC_SEGS_V) * (KV_WIDTH / 8u)] = ring[r0 + p].v[j];
        }}
        if (more) dc_load_values({NEXT});
        DC_SYNC();
        sink ^= dc_tile[rbase + lane + 32u];
        DC_SYNC();
      }}
""",
}


def replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        sys.exit(f"decode_loop_copies: expected one {old.strip()!r} in {KERNEL}")
    return text.replace(old, new)


def main() -> None:
    root = Path(sys.argv[1])
    source = Path("kernels", KERNEL).read_text()
    begin, end = source.find(BEGIN), source.find(END)
    if begin < 0 or end < begin:
        sys.exit(f"decode_loop_copies: the tile loop's first or last statement is not in {KERNEL}")
    for name, body in BODIES.items():
        text = source[:begin] + BEGIN + body + source[end + len(END):]
        text = replace_once(text, "  DcTile ring[DC_RING];\n", "  DcTile ring[DC_RING];\n  uvec4 sink = uvec4(0u);\n")
        # A condition the compiler cannot decide keeps every load live.
        text = replace_once(text, "  // The subgroup's normalised partial",
                            "  if ((sink.x ^ sink.y ^ sink.z ^ sink.w) == 0x9e3779b9u) l[0] += 1.0;\n"
                            "  // The subgroup's normalised partial")
        out = root / name
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree("kernels", out)
        (out / KERNEL).write_text(text)


if __name__ == "__main__":
    main()
