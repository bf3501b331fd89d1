#!/usr/bin/env python3
"""Makes a replay for `foundry run --inputs ... --expect ...` with PyTorch: random q, k, v for every
layer and token (unrotated, as projections produce them), RoPE as Hugging Face applies it (with the
config's frequency scaling), and torch SDPA outputs for the prefill (causal) and for every decode
token (all cached keys). Writes inputs.safetensors (q, k, v) and expect.safetensors (o), each
[layers, batch, tokens, heads, head_dim] in f16.

Usage: python3 bench/replay_torch.py CONFIG --layers L --prompt-len P --decode-tokens N --out DIR"""
import argparse, json, math, os, struct
import torch
import torch.nn.functional as F


def save_file(tensors, path):
    """safetensors, written here so that the replay needs nothing beyond torch: an 8-byte little-endian
    header length, the JSON header (dtype, shape, data_offsets per tensor), then the raw data."""
    names = {torch.float16: "F16", torch.float32: "F32"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        flat = t.contiguous().cpu().flatten().view(torch.uint8)
        try:
            data = flat.numpy().tobytes()
        except (ImportError, RuntimeError):  # torch built without numpy
            data = bytes(flat.tolist())
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(path + ".tmp", path)


p = argparse.ArgumentParser()
p.add_argument("config")
p.add_argument("--layers", type=int, default=2)
p.add_argument("--batch", type=int, default=1)
p.add_argument("--prompt-len", type=int, default=64)
p.add_argument("--decode-tokens", type=int, default=8)
p.add_argument("--out", required=True)
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()

cfg = json.load(open(a.config))
att = cfg["attention"]
L, B, P, N = a.layers, a.batch, a.prompt_len, a.decode_tokens
T = P + N
Hq, Hkv, D = att["n_heads"], att["n_kv_heads"], att["head_dim"]
rope = att["rope"]
rot = rope.get("rotary_dims", D)
theta = float(rope["theta"])

# Inverse frequencies as transformers computes them (rope_type "default" or "llama3").
inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
scaling = rope.get("scaling")
if scaling:
    assert scaling["type"] == "llama3"
    factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position"]
    low_wavelen, high_wavelen = old / lo, old / hi
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    inv_freq = torch.where(medium, smoothed, scaled)

dev = "cuda"
pos = torch.arange(T, dtype=torch.float64)
angles = torch.outer(pos, inv_freq).to(dev)  # [T, rot/2], in float64 here
cos, sin = torch.cos(angles).float(), torch.sin(angles).float()

def apply_rope(x, interleaved):  # x: [B, H, T, D] float32
    r, rest = x[..., :rot], x[..., rot:]
    if interleaved:
        x1, x2 = r[..., 0::2], r[..., 1::2]
        c, s = cos[None, None], sin[None, None]
        out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        h = rot // 2
        x1, x2 = r[..., :h], r[..., h:]
        c, s = cos[None, None], sin[None, None]
        out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return torch.cat((out, rest), dim=-1)

interleaved = rope.get("pairing", "rotate_half") == "interleaved"
g = torch.Generator(device=dev).manual_seed(a.seed)
qs, ks, vs, os_ = [], [], [], []
for layer in range(L):
    q = torch.randn(B, T, Hq, D, device=dev, generator=g).half()   # token-major, unrotated
    k = torch.randn(B, T, Hkv, D, device=dev, generator=g).half()
    v = torch.randn(B, T, Hkv, D, device=dev, generator=g).half()
    qr = apply_rope(q.float().transpose(1, 2), interleaved).half()  # [B, Hq, T, D]
    kr = apply_rope(k.float().transpose(1, 2), interleaved).half()
    vt = v.transpose(1, 2)
    if Hq != Hkv:  # GQA: each KV head serves Hq / Hkv consecutive query heads
        kr, vt = kr.repeat_interleave(Hq // Hkv, dim=1), vt.repeat_interleave(Hq // Hkv, dim=1)
    o = torch.empty(B, Hq, T, D, device=dev, dtype=torch.float16)
    o[:, :, :P] = F.scaled_dot_product_attention(qr[:, :, :P], kr[:, :, :P], vt[:, :, :P], is_causal=True)
    for t in range(P, T):
        o[:, :, t:t + 1] = F.scaled_dot_product_attention(qr[:, :, t:t + 1], kr[:, :, :t + 1], vt[:, :, :t + 1],
                                                          is_causal=False)
    qs.append(q); ks.append(k); vs.append(v); os_.append(o.transpose(1, 2))
os.makedirs(a.out, exist_ok=True)
save_file({"q": torch.stack(qs).contiguous().cpu(), "k": torch.stack(ks).contiguous().cpu(),
           "v": torch.stack(vs).contiguous().cpu()}, os.path.join(a.out, "inputs.safetensors"))
save_file({"o": torch.stack(os_).contiguous().cpu()}, os.path.join(a.out, "expect.safetensors"))
print(f"replay: {cfg['name']}: layers {L}, batch {B}, prompt {P}, decode {N}, torch {torch.__version__}")
