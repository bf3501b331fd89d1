# PyTorch SDPA (flash backend) on the decode shapes ../shared/device/torch_sdpa.py does not cover
# (batch 8), with the same method: triton do_bench median, L2 flushed; one JSON line per shape.
import json
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
import triton.testing as tt

torch.manual_seed(0)
for B, L, D in ((8, 4096, 128), (8, 16384, 128)):
    q = torch.randn(B, 32, 1, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, 8, L, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, 8, L, D, device="cuda", dtype=torch.float16)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=True)
        fn()
        torch.cuda.synchronize()
        ms = tt.do_bench(fn, warmup=25, rep=100, return_mode="median")
    print(json.dumps(dict(kind="decode", B=B, Hq=32, Hkv=8, Sq=1, Skv=L, D=D, causal=False, backend="FLASH_ATTENTION",
                          us=round(ms * 1000, 2))))
