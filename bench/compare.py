#!/usr/bin/env python3
"""Side-by-side table of `foundry bench --json` and PyTorch SDPA timings (JSON lines), matched by
shape. With --markdown-into FILE, replaces the section between the markers in FILE."""
import argparse, datetime, json, re, sys

p = argparse.ArgumentParser()
p.add_argument("bench")
p.add_argument("torch")
p.add_argument("--markdown-into")
p.add_argument("--gpu", default="")
a = p.parse_args()

bench = json.load(open(a.bench))
torch = {}
for line in open(a.torch):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "us" in r and r.get("kind") in ("decode", "prefill"):
        torch[(r["kind"], r["B"], r["Sq"], r["Skv"], r["D"])] = r["us"]

def na(value, fmt):
    """A value the bench did not measure (null in its JSON) is shown as n/a, never 0."""
    return "n/a" if value is None else format(value, fmt)


rows = ["| shape | ours us | torch flash us | torch / ours | TFLOP/s | K/V GB/s | % of ceiling | check |",
        "|---|---|---|---|---|---|---|---|"]
for r in bench["results"]:
    t = torch.get((r["kind"], r["B"], r["Sq"], r["Skv"], r["D"]))
    ratio = f"{t / r['us']:.2f}x" if t else "-"
    rows.append(f"| {r['name']} | {r['us']:.1f} | {t if t else '-'} | {ratio} | {r['tflops']:.1f} | "
                f"{r['kv_gbs']:.0f} | {na(r['pct_ceiling'], '.0f')}% of {r.get('ceiling', 'ceiling')} | {'ok' if r['checked'] else 'FAIL'} {r['rel_error']:.1e} |")
c = bench["ceilings"]
head = (f"Device: {bench['device']} ({bench['driver']}); {a.gpu}\n\n"
        f"Ceilings measured in the same run: GLSL read stream {na(c['read_gbs'], '.0f')} GB/s, "
        f"cooperative-matrix f16->f32 MMA {na(c['mma_tflops'], '.0f')} TFLOP/s; the floor under a call: an empty "
        f"dispatch {c.get('empty_dispatch_us', 0):.1f} us, two dependent ones (a barrier between) "
        f"{c.get('dependent_pair_us', 0):.1f} us.\n")
table = head + "\n" + "\n".join(rows) + "\n"
print(table)
if a.markdown_into:
    doc = open(a.markdown_into).read()
    stamp = datetime.date.today().isoformat()
    block = (f"<!-- bench:begin -->\nMeasured {stamp} with `bash bench/h200.sh prepare`, the device call "
             f"`bash bench/h200.sh device` (carry `.device`), then `bash bench/h200.sh report DIR`.\n\n"
             f"{table}<!-- bench:end -->")
    doc, n = re.subn(r"<!-- bench:begin -->.*<!-- bench:end -->", block, doc, flags=re.S)
    if n == 0:
        doc += "\n" + block + "\n"
    open(a.markdown_into, "w").write(doc)
