#!/usr/bin/env python3
"""The markdown table of `bench/h200.sh ring`: foundry_cp_bench --prefill's JSON lines (one per run),
each run's prefill time against the one-GPU (--direct) run of the same context.

  python3 bench/ring_table.py ring.jsonl [--gpu NAME]

Speed-up is the one-GPU time over the run's; the slowest rank's attention is its GPU time over every
block it attended; wait is the longest time a rank waited for a transfer after its attention was done;
upload is the longest host-to-device copy time of received blocks.
"""
import argparse
import sys

from cp_table import read_runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--gpu", default="")
    args = ap.parse_args()
    runs = read_runs(args.jsonl, "ring_table.py")
    if not runs:
        return 1
    direct = {r["context"]: r["prefill_us"] for r in runs if r["mode"] == "direct" and "prefill_us" in r}
    r0 = runs[0]
    print(f"Ring prefill, {r0['heads']} query heads / {r0['kv_heads']} KV heads, D {r0['head_dim']}, "
          f"batch {r0['batch']}, {r0['dtype']}, {'causal' if r0['causal'] else 'bidirectional'}, one layer; "
          f"medians of {r0['iterations']} prefills" + (f"; {args.gpu}" if args.gpu else ""))
    print()
    print("| context | GPUs | positions per rank | prefill ms | TFLOP/s | one GPU ms | speed-up "
          "| slowest rank's attention ms | longest wait ms | longest upload ms | GiB moved | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(runs, key=lambda r: (r["context"], r["mode"] != "direct", r["ranks"], r["split"])):
        ok = "passed" if r.get("check", {}).get("passed") else "FAILED"
        if "prefill_us" not in r:
            print(f"| {r['context']} | {r['ranks']} | {r['split']} | - | - | - | - | - | - | - | - | {ok} |")
            continue
        ranks = r["per_rank"]
        base = direct.get(r["context"])
        step = r["prefill_us"]
        speed = f"{base / step:.2f}x" if base else "-"
        sizes = "one GPU" if r["mode"] == "direct" else " / ".join(str(int(x["queries"])) for x in ranks)
        print(f"| {r['context']} | {r['ranks']} | {sizes} | {step / 1000:.1f} | {r['tflops']:.0f} "
              f"| {base / 1000 if base else 0:.1f} | {speed} "
              f"| {max(x['attention_us'] for x in ranks) / 1000:.1f} | {max(x['wait_us'] for x in ranks) / 1000:.1f} "
              f"| {max(x['upload_us'] for x in ranks) / 1000:.1f} | {r['bytes_moved'] / 2**30:.2f} | {ok} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
