#!/usr/bin/env python3
"""Copies of kernels/ in which one round of each subgroup's own keys in the tensor-core decode
(decode_coopmat.glsl as in the tree) does no arithmetic: its loads are awaited and folded into a word that
reaches the output, the next round's loads are issued as the plan issues them, and nothing is staged,
multiplied or summed. Each computes a wrong output (the bench reports FAIL and times it). Against the
plan, what one round's arithmetic costs where it falls:
  skip-first  the subgroup's first round (overlapped by the second round's loads in the plan);
  skip-mid    its ninth round (a round in the steady stream);
  skip-last   its last round (no loads left in flight behind it: the stream's tail).
If skip-last gains far more than skip-mid, the kernel's time over its loads is the tail's arithmetic; if
the two gain alike, it is each round's.
Usage (from the repository root, before packing): python3 bench/decode_round_copies.py .device/kx [NAME...]
"""
import pathlib
import sys

from decode_kernel_copies import KERNEL, sub, write_copies

tree = pathlib.Path("kernels", KERNEL).read_text()

ROUND_RANGE = "    const uint next_hi = next_claimed ? claim_end : kv_end, next_last = next_hi - 1u;\n"
SKIP = """    if (SKIP_ROUND) {
      [[unroll]] for (uint r = 0u; r < DC_RING; ++r) {
        [[unroll]] for (uint j = 0u; j < DC_LOADS_K; ++j) sink ^= ring[r].k[j];
        [[unroll]] for (uint j = 0u; j < DC_LOADS_V; ++j) sink ^= ring[r].v[j];
        const uint t_after = t_next + r * DC_KEYS;
        if (t_after < next_hi) {
          dc_load_keys(t_after, next_last, b, kv_h, ring[r]);
          dc_load_values(t_after, next_last, b, kv_h, ring[r]);
        }
      }
      continue;
    }
"""
CONDITIONS = {
    "skip-first": "t0 == first",
    "skip-mid": "t0 == first + 8u * round_step",
    "skip-last": "t_next >= kv_end",
}


def skip(text, condition):
    text = sub(text, ROUND_RANGE, ROUND_RANGE + SKIP.replace("SKIP_ROUND", condition))
    text = sub(text, "  DcTile ring[DC_RING];\n", "  DcTile ring[DC_RING];\n  uvec4 sink = uvec4(0u);\n")
    return sub(text, "  float inv[2];\n", "  float inv[2];\n  l[0] += float(sink.x & 1u) * 1e-30;\n")


copies = {name: skip(tree, condition) for name, condition in CONDITIONS.items()}
write_copies(sys.argv[1], copies, sys.argv[2:])
