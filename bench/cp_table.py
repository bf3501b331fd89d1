#!/usr/bin/env python3
"""The markdown table of `bench/h200.sh cp`: foundry_cp_bench's JSON lines (one per run) as time per
token against one GPU at each context.

  python3 bench/cp_table.py cp.jsonl [--gpu NAME]

"one GPU" is the --direct run (FlashAttentionStep over the whole cache on one device) at the same
context; where the cache did not fit on one GPU, the direct time at the largest context that did,
scaled by the ratio of the contexts (decode reads every key once: its time grows with the keys), and
the cell says so. Speed-up is that time over the run's; the gather+merge share is rank 0's gather
(waiting for the slowest rank included) plus the merge kernel, over the step's wall time.
"""
import argparse
import json
import sys


def read_runs(path, tool):
    """The JSON lines of a bench's output (other lines skipped); a message on stderr when none."""
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                runs.append(json.loads(line))
    if not runs:
        print(f"{tool}: no runs in {path}", file=sys.stderr)
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--gpu", default="")
    args = ap.parse_args()
    runs = read_runs(args.jsonl, "cp_table.py")
    if not runs:
        return 1
    direct = {r["context"]: r for r in runs if r["mode"] == "direct" and "step_us" in r}
    largest = max(direct) if direct else None

    def one_gpu(context):
        if context in direct:
            return direct[context]["step_us"], ""
        if largest is None:
            return None, ""
        return direct[largest]["step_us"] * context / largest, f" (scaled from {largest})"

    r0 = runs[0]
    print(f"Context-parallel decode, {r0['heads']} query heads / {r0['kv_heads']} KV heads, D {r0['head_dim']}, "
          f"batch {r0['batch']}, {r0['dtype']} K/V, one layer; medians of {r0['tokens']} steps"
          + (f"; {args.gpu}" if args.gpu else ""))
    print()
    print("| context | GPUs | mode | time/token us | one GPU us | speed-up | slowest rank's attention us "
          "| gather us | merge us | gather+merge share | bytes/token | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(runs, key=lambda r: (r["context"], r["mode"] != "direct", r["mode"], r["ranks"])):
        check = r.get("check", {})
        ok = "passed" if check.get("passed") else "FAILED"
        if "step_us" not in r:
            print(f"| {r['context']} | {r['ranks']} | {r['mode']} | - | - | - | - | - | - | - | - | {ok} |")
            continue
        base, note = one_gpu(r["context"])
        step = r["step_us"]
        speed = f"{base / step:.2f}x" if base else "-"
        share = (r["gather_us"] + r["merge_us"]) / step if step else 0
        mode = {"direct": "direct", "head_parallel": "head-parallel"}.get(r["mode"], "context-parallel")
        base_cell = f"{base:.1f}{note}" if base else "-"
        print(f"| {r['context']} | {r['ranks']} | {mode} | {step:.1f} | {base_cell} | {speed} "
              f"| {r['attention_us_slowest_rank']:.1f} | {r['gather_us']:.1f} | {r['merge_us']:.1f} "
              f"| {100 * share:.0f}% | {int(r['bytes_per_step'])} | {ok} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
