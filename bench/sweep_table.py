#!/usr/bin/env python3
"""Prints a `foundry bench --sweep --json` file as a table: variant, us, TFLOP/s, check, and what the
driver reported about the main kernel (registers, stack, shared memory), so a sweep's timings can be
read next to the occupancy that explains them.

    python3 bench/sweep_table.py sweep.json [more.json ...]
    python3 bench/sweep_table.py --plain LABEL... -- result.json   # "LABEL... shape us ok|wrong N%-of-C" lines
"""
import json
import sys


def driver_stats(result):
    stats = result.get("statistics") or {}
    main = next((k for k in result.get("kernels", []) if "Reduce" not in k), None)
    pairs = dict(stats.get(main, [])) if main else {}
    keep = []
    for name, value in pairs.items():
        low = name.lower()
        if "register" in low or "stack" in low or "shared" in low or "local" in low:
            keep.append(f"{name}={value}")
    return ", ".join(keep)


def results(path):
    with open(path) as f:
        return json.load(f).get("results", [])


def plain(labels, paths):
    for path in paths:
        for r in results(path):
            pct = r.get("pct_ceiling")
            ceiling = f"{pct:.1f}%-of-{r.get('ceiling', '')}" if pct is not None else ""
            print(*labels, r["name"], f"{r['us']:.1f}", "ok" if r.get("checked") else "wrong", ceiling)


def main(paths):
    print("| shape | variant | us | TFLOP/s | check | driver |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        for r in results(path):
            check = f"ok {r['rel_error']:.1e}" if r.get("checked") else f"FAIL {r['rel_error']:.1e}"
            print(f"| {r['name']} | {r.get('variant', '')} | {r['us']:.1f} | {r['tflops']:.1f} | {check} | {driver_stats(r)} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--plain"] and "--" in args:
        cut = args.index("--")
        plain(args[1:cut], args[cut + 1:])
    else:
        main(args)
