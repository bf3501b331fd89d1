#!/usr/bin/env python3
"""Side-by-side table of `foundry bench --json` and PyTorch SDPA timings (JSON lines), matched by
shape; with --ggml, llama.cpp's too (bench/ggml/ggml_fa_bench's JSON lines). With --markdown-into
FILE, replaces the section between the markers in FILE."""
import argparse, datetime, json, re, sys

p = argparse.ArgumentParser()
p.add_argument("bench")
p.add_argument("torch")
p.add_argument("--markdown-into")
p.add_argument("--gpu", default="")
p.add_argument("--ggml", help="ggml_fa_bench's JSON lines: adds the llama.cpp column")
p.add_argument("--device-command", default="bash bench/h200.sh device",
               help="the device call that made the files, for the note above the table")
a = p.parse_args()

bench = json.load(open(a.bench))

def timings(path):
    """JSON lines with kind, B, Sq, Skv, D and us, by shape (other lines are skipped)."""
    out = {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "us" in r and r.get("kind") in ("decode", "prefill"):
            out[(r["kind"], r["B"], r["Sq"], r["Skv"], r["D"])] = r
    return out


torch = {k: r["us"] for k, r in timings(a.torch).items()}
ggml = timings(a.ggml) if a.ggml else None

def na(value, fmt):
    """A value the bench did not measure (null in its JSON) is shown as n/a, never 0."""
    return "n/a" if value is None else format(value, fmt)


def ggml_cells(key, ours):
    """llama.cpp's time (its own check's failure shown beside it) and its ratio to ours."""
    g = ggml.get(key)
    if not g:
        return "-", "-"
    time = f"{g['us']:.1f}" + ("" if g["checked"] else f" (check FAIL {g['rel_error']:.1e})")
    return time, f"{g['us'] / ours:.2f}x"


peers = ggml is not None
head_cells = ["shape", "ours us", "torch flash us"] + (["llama.cpp us"] if peers else []) + ["torch / ours"] + \
    (["llama.cpp / ours"] if peers else []) + ["TFLOP/s", "K/V GB/s", "% of ceiling", "check"]
rows = ["| " + " | ".join(head_cells) + " |", "|" + "---|" * len(head_cells)]
for r in bench["results"]:
    key = (r["kind"], r["B"], r["Sq"], r["Skv"], r["D"])
    t = torch.get(key)
    g_time, g_ratio = ggml_cells(key, r["us"]) if peers else (None, None)
    cells = [r["name"], f"{r['us']:.1f}", f"{t if t else '-'}"] + ([g_time] if peers else []) + \
        [f"{t / r['us']:.2f}x" if t else "-"] + ([g_ratio] if peers else []) + \
        [f"{r['tflops']:.1f}", f"{r['kv_gbs']:.0f}", "n/a" if r["pct_ceiling"] is None else f"{r['pct_ceiling']:.0f}% of {r.get('ceiling', 'ceiling')}",
         f"{'ok' if r['checked'] else 'FAIL'} {r['rel_error']:.1e}"]
    rows.append("| " + " | ".join(cells) + " |")
c = bench["ceilings"]
head = (f"Device: {bench['device']} ({bench['driver']}); {a.gpu}\n\n"
        f"Ceilings measured in the same run: GLSL read stream {na(c['read_gbs'], '.0f')} GB/s, "
        f"cooperative-matrix f16->f32 MMA {na(c['mma_tflops'], '.0f')} TFLOP/s; the floor under a call: an empty "
        f"dispatch {c.get('empty_dispatch_us', 0):.1f} us, two dependent ones (a barrier between) "
        f"{c.get('dependent_pair_us', 0):.1f} us.\n")
if ggml:
    g = next(iter(ggml.values()))
    head += (f"\nllama.cpp: ggml {g.get('ggml', '?')} from node-llama-cpp's Vulkan build, `ggml_flash_attn_ext` "
             f"(f32 Q and output, f16 K/V, f32 accumulation; causal prefill through an f16 mask), GPU time per op from "
             f"ggml's own timer; its device line: {g.get('device', '?')}.\n")
table = head + "\n" + "\n".join(rows) + "\n"
print(table)
if a.markdown_into:
    doc = open(a.markdown_into).read()
    stamp = datetime.date.today().isoformat()
    block = (f"<!-- bench:begin -->\nMeasured {stamp} with `bash bench/h200.sh prepare`, the device call "
             f"`{a.device_command}` (carry `.device`), then `bash bench/h200.sh report DIR`.\n\n"
             f"{table}<!-- bench:end -->")
    doc, n = re.subn(r"<!-- bench:begin -->.*<!-- bench:end -->", block, doc, flags=re.S)
    if n == 0:
        doc += "\n" + block + "\n"
    open(a.markdown_into, "w").write(doc)
