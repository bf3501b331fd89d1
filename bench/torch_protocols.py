# PyTorch's flash decode (B1, Hq 32, Hkv 8, D128, kv 65536 unless given KV; f16, or the dtype named
# second: float16, bfloat16) timed three ways, to
# set beside `foundry bench` with and without --wait-each-batch in the same device call:
#   do_bench   triton's do_bench (each call after an L2 flush, back to back): the numbers of
#              bench/torch_formats.py;
#   queued     batches of 70 calls over 3 input copies (no flush: the copies are 3 x 268 MB), each
#              call between CUDA events, the batches launched back to back, as `foundry bench` now;
#   gapped     the same batches, each waited for and followed by 3 ms of idle GPU, as `foundry bench
#              --wait-each-batch` (and the bench before 2026-11-29).
# One JSON line per protocol: the median call in us, and the GPU's clock and power after each.
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
import triton.testing as tt
from torch.nn.attention import SDPBackend, sdpa_kernel

KV = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
DTYPE = sys.argv[2] if len(sys.argv) > 2 else "float16"
COPIES, CALLS, BATCHES = 3, 70, 40
torch.manual_seed(0)
ins = [tuple(torch.randn(1, heads, rows, 128, device="cuda", dtype=getattr(torch, DTYPE))
             for heads, rows in ((32, 1), (8, KV), (8, KV))) for _ in range(COPIES)]


def call(i):
    q, k, v = ins[i % COPIES]
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def smi():
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    return out


def batches(gap_s):
    events = []
    for _ in range(BATCHES):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * CALLS)]
        for c in range(CALLS):
            ev[2 * c].record()
            call(c)
            ev[2 * c + 1].record()
        events.append(ev)
        if gap_s:
            torch.cuda.synchronize()
            time.sleep(gap_s)
    torch.cuda.synchronize()
    times = sorted(ev[2 * c].elapsed_time(ev[2 * c + 1]) for ev in events for c in range(CALLS))
    return times[len(times) // 2] * 1000


with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    for _ in range(3):
        call(0)
    torch.cuda.synchronize()
    for proto in ("do_bench", "queued", "gapped", "queued", "gapped", "do_bench"):
        if proto == "do_bench":
            us = tt.do_bench(lambda: call(0), warmup=25, rep=100, return_mode="median") * 1000
        else:
            batches(0.003 if proto == "gapped" else 0)  # warm-up
            us = batches(0.003 if proto == "gapped" else 0)
        print(json.dumps(dict(kind="decode", B=1, Hq=32, Hkv=8, Skv=KV, D=128, dtype=DTYPE, protocol=proto,
                              us=round(us, 2), smi_after=smi())), flush=True)
