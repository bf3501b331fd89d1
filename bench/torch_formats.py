# PyTorch SDPA (flash backend) in f16 and bf16 on the shapes `bench/h200.sh formats` times Foundry's
# KV formats on, with torch_batch.py's method (triton do_bench median, L2 flushed), and each output
# checked against float64 math first. One JSON line per (shape, dtype).
import json
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
import triton.testing as tt

torch.manual_seed(0)
SHAPES = (("decode", 1, 1, 65536), ("decode", 8, 1, 16384), ("prefill", 1, 8192, 8192))
DTYPES = (torch.float16, torch.bfloat16)
# Arguments KIND:B:SQ:SKV:DTYPE (f16 or bf16) time those alone.
if len(sys.argv) > 1:
    SHAPES = [a.split(":") for a in sys.argv[1:]]
for shape in SHAPES:
    kind, B, Sq, Skv = shape[0], int(shape[1]), int(shape[2]), int(shape[3])
    for dtype in DTYPES if len(shape) < 5 else ({"f16": torch.float16, "bf16": torch.bfloat16}[shape[4]],):
        q = torch.randn(B, 32, Sq, 128, device="cuda", dtype=dtype)
        k = torch.randn(B, 8, Skv, 128, device="cuda", dtype=dtype)
        v = torch.randn(B, 8, Skv, 128, device="cuda", dtype=dtype)
        causal = kind == "prefill"
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            out = fn()
            torch.cuda.synchronize()
            ms = tt.do_bench(fn, warmup=25, rep=100, return_mode="median")
        # The last query row of every head against float64.
        kk = k.double().repeat_interleave(4, dim=1)
        vv = v.double().repeat_interleave(4, dim=1)
        s = (q[:, :, -1:].double() @ kk.transpose(-1, -2)) / 128 ** 0.5
        want = torch.softmax(s, dim=-1) @ vv
        err = ((out[:, :, -1:].double() - want).abs().max() / want.abs().max()).item()
        print(json.dumps(dict(kind=kind, B=B, Hq=32, Hkv=8, Sq=Sq, Skv=Skv, D=128, causal=causal,
                              dtype=str(dtype).replace("torch.", ""), backend="FLASH_ATTENTION",
                              us=round(ms * 1000, 2), rel_error=err)), flush=True)
