#!/usr/bin/env python3
"""Prints a `foundry bench --suite modifiers --json` file as two tables: each modifier's time beside
the same shape without it (its cost, in percent), and the sliding-window speed figures (causal
prefill S=32768 with and without a 4096-key window; decode at kv 65536 with the window against plain
decode at kv 4096).

    python3 bench/modifier_table.py modifiers.json
"""
import json
import sys


def main(path):
    with open(path) as f:
        rs = json.load(f)["results"]
    key = lambda r: (r["kind"], r["B"], r["D"], r["Sq"], r["Skv"])
    plain = {key(r): r for r in rs if not r.get("modifiers")}
    print("| shape | modifier | us | without | cost | check |")
    print("|---|---|---|---|---|---|")
    for r in rs:
        mods = r.get("modifiers") or []
        base = plain.get(key(r))
        if not mods or not base:
            continue
        if any(m.startswith("window") and int(m[6:]) < r["Skv"] for m in mods):
            continue  # a window shorter than the cache does less work: a speed figure, below
        cost = 100.0 * (r["us"] / base["us"] - 1.0)
        ok = "ok" if r["checked"] and base["checked"] else "WRONG"
        print(f"| {base['name']} | {'+'.join(mods)} | {r['us']:.1f} | {base['us']:.1f} | {cost:+.1f}% | {ok} |")
    print()
    find = lambda kind, skv, mods: next((r for r in rs if r["kind"] == kind and r["Skv"] == skv and r["B"] == 1
                                         and r["D"] == 128 and (r.get("modifiers") or []) == mods), None)
    p, pw = find("prefill", 32768, []), find("prefill", 32768, ["window4096"])
    d4, dw = find("decode", 4096, []), find("decode", 65536, ["window4096"])
    print("| figure | us | against | ratio | target |")
    print("|---|---|---|---|---|")
    if p and pw:
        print(f"| prefill S32768 D128 causal, window 4096 | {pw['us']:.1f} | {p['us']:.1f} without | "
              f"{p['us'] / pw['us']:.2f}x faster | >= 3.8x |")
    if d4 and dw:
        print(f"| decode kv65536 D128, window 4096 | {dw['us']:.1f} | {d4['us']:.1f} at kv4096 | "
              f"{dw['us'] / d4['us']:.3f}x | <= 1.1x |")


if __name__ == "__main__":
    main(sys.argv[1])
