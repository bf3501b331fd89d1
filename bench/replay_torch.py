#!/usr/bin/env python3
"""Makes a replay for `foundry run --inputs ... --expect ...` with PyTorch: random q, k, v for every
layer and token (unrotated, as projections produce them), RoPE as Hugging Face applies it (with the
config's frequency scaling: llama3 or yarn, and none for rope-less models), and the attention
outputs for the prefill (causal) and for every decode token (all cached keys). Without modifiers the
outputs come from torch SDPA; with them from explicit torch math written from the models' own
definitions: sliding windows as masks, soft-caps and ALiBi on the scores, sinks as an extra softmax
column that is dropped afterwards. Writes inputs.safetensors (q, k, v) and expect.safetensors (o),
each [layers, batch, tokens, heads, head_dim] in f16, and config.json: the config the replay holds
(sink logits drawn here and written into it, so both sides use the same; --head-dim and --window
override the model's for a replay the fused kernels can run).

Usage: python3 bench/replay_torch.py CONFIG --layers L --prompt-len P --decode-tokens N --out DIR"""
import argparse, json, math, os, struct
import torch
import torch.nn.functional as F


def save_file(tensors, path):
    """safetensors, written here so that the replay needs nothing beyond torch: an 8-byte little-endian
    header length, the JSON header (dtype, shape, data_offsets per tensor), then the raw data."""
    names = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}
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
p.add_argument("--head-dim", type=int, help="replace the model's head_dim")
p.add_argument("--window", type=int, help="replace every sliding window's size")
p.add_argument("--dtype", choices=("f16", "bf16"), default="f16", help="q, k, v and o as stored")
a = p.parse_args()

cfg = json.load(open(a.config))
att = cfg["attention"]
if a.head_dim:
    att["head_dim"] = a.head_dim
L, B, P, N = a.layers, a.batch, a.prompt_len, a.decode_tokens
T = P + N
Hq, Hkv, D = att["n_heads"], att["n_kv_heads"], att["head_dim"]
dev = "cuda"
dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
g = torch.Generator(device=dev).manual_seed(a.seed)
scale = att["query_pre_attn_scalar"] ** -0.5 if "query_pre_attn_scalar" in att else D ** -0.5
mods = att.get("modifiers", [])
for m in mods:
    if m["type"] == "sliding_window" and a.window:
        m["window"] = a.window
    if m["type"] == "sinks" and "values" not in m:  # the checkpoint's learned logits stand-in
        m["values"] = [round(x, 4) for x in (torch.rand(Hq, generator=g, device=dev) * 6 - 2).tolist()]
    if m["type"] == "alibi" and "slopes" not in m:  # BLOOM's and MPT's slopes from the head count
        n = 2 ** int(math.floor(math.log2(Hq)))
        m["slopes"] = [2 ** (-8 * (i + 1) / n) if i < n else 2 ** (-4 * (2 * (i - n) + 1) / n) for i in range(Hq)]


def applies(m, layer):
    sel = m.get("layers")
    if sel is None:
        return True
    if isinstance(sel, list):
        return layer in sel
    return layer % sel["every"] == sel.get("offset", 0)


rope = att.get("rope")
rot = rope.get("rotary_dims", D) if rope else 0
theta = float(rope["theta"]) if rope else 1.0
attention_factor = 1.0

# Inverse frequencies as transformers computes them (rope_type "default", "llama3" or "yarn").
inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)) if rope else torch.zeros(0)
scaling = rope.get("scaling") if rope else None
yarn = rope.get("yarn") if rope else None
if yarn:  # transformers' _compute_yarn_parameters
    factor, orig = yarn["factor"], yarn["original_max_position"]
    beta_fast, beta_slow = yarn.get("beta_fast", 32.0), yarn.get("beta_slow", 1.0)
    corr = lambda r: rot * math.log(orig / (r * 2 * math.pi)) / (2 * math.log(theta))
    low, high = corr(beta_fast), corr(beta_slow)
    if yarn.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rot - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(rot // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp
    inv_freq = inv_freq / factor * (1 - extrapolation) + inv_freq * extrapolation
    mscale = lambda m: 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0
    if "attention_factor" in yarn:
        attention_factor = yarn["attention_factor"]
    elif "mscale" in yarn and "mscale_all_dim" in yarn:
        attention_factor = mscale(yarn["mscale"]) / mscale(yarn["mscale_all_dim"])
    else:
        attention_factor = mscale(1.0)
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

pos = torch.arange(T, dtype=torch.float64)
angles = torch.outer(pos, inv_freq).to(dev)  # [T, rot/2], in float64 here
cos, sin = (torch.cos(angles) * attention_factor).float(), (torch.sin(angles) * attention_factor).float()

def apply_rope(x, interleaved):  # x: [B, H, T, D] float32
    if not rope:
        return x
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

def attend(q, k, v, q_pos, layer):
    """Attention written out in float32 from the models' definitions: q [B, H, M, D] at positions
    q_pos (M), k and v [B, H, S, D] at positions 0 .. S-1."""
    s = (q.float() @ k.float().transpose(-1, -2)) * scale          # [B, H, M, S]
    kp = torch.arange(k.shape[2], device=dev)
    visible = kp[None, :] <= q_pos[:, None]                          # causal
    sink = None
    for m in (m for m in mods if applies(m, layer)):
        if m["type"] == "soft_cap":                                 # Gemma 2
            s = m["cap"] * torch.tanh(s / m["cap"])
        elif m["type"] == "alibi":                                  # BLOOM / MPT, up to a row constant
            slopes = torch.tensor(m["slopes"], device=dev)
            s = s + slopes[None, :, None, None] * (kp[None, :] - q_pos[:, None]).float()[None, None]
        elif m["type"] == "sliding_window":                         # transformers' sliding_window_overlay
            left = m["window"] - 1 if "window" in m else m.get("left", 0)
            visible &= (kp[None, :] >= q_pos[:, None] - left) & (kp[None, :] <= q_pos[:, None] + m.get("right", 0))
        elif m["type"] == "sinks":                                  # gpt-oss: a column in the denominator
            sink = torch.tensor(m["values"], device=dev)
    s = s.masked_fill(~visible[None, None], float("-inf"))
    if sink is not None:
        s = torch.cat((s, sink[None, :, None, None].expand(s.shape[0], -1, s.shape[2], 1)), dim=-1)
    p = torch.softmax(s, dim=-1)
    if sink is not None:
        p = p[..., :-1]
    return (p @ v.float()).to(dt)


interleaved = rope.get("pairing", "rotate_half") == "interleaved" if rope else False
qs, ks, vs, os_ = [], [], [], []
for layer in range(L):
    q = torch.randn(B, T, Hq, D, device=dev, generator=g).to(dt)   # token-major, unrotated
    k = torch.randn(B, T, Hkv, D, device=dev, generator=g).to(dt)
    v = torch.randn(B, T, Hkv, D, device=dev, generator=g).to(dt)
    qr = apply_rope(q.float().transpose(1, 2), interleaved).to(dt)  # [B, Hq, T, D]
    kr = apply_rope(k.float().transpose(1, 2), interleaved).to(dt)
    vt = v.transpose(1, 2)
    if Hq != Hkv:  # GQA: each KV head serves Hq / Hkv consecutive query heads
        kr, vt = kr.repeat_interleave(Hq // Hkv, dim=1), vt.repeat_interleave(Hq // Hkv, dim=1)
    o = torch.empty(B, Hq, T, D, device=dev, dtype=dt)
    if mods:
        o[:, :, :P] = attend(qr[:, :, :P], kr[:, :, :P], vt[:, :, :P], torch.arange(P, device=dev), layer)
        for t in range(P, T):
            o[:, :, t:t + 1] = attend(qr[:, :, t:t + 1], kr[:, :, :t + 1], vt[:, :, :t + 1],
                                      torch.tensor([t], device=dev), layer)
    else:
        o[:, :, :P] = F.scaled_dot_product_attention(qr[:, :, :P], kr[:, :, :P], vt[:, :, :P], is_causal=True,
                                                     scale=scale)
        for t in range(P, T):
            o[:, :, t:t + 1] = F.scaled_dot_product_attention(qr[:, :, t:t + 1], kr[:, :, :t + 1], vt[:, :, :t + 1],
                                                              is_causal=False, scale=scale)
    qs.append(q); ks.append(k); vs.append(v); os_.append(o.transpose(1, 2))
os.makedirs(a.out, exist_ok=True)
save_file({"q": torch.stack(qs).contiguous().cpu(), "k": torch.stack(ks).contiguous().cpu(),
           "v": torch.stack(vs).contiguous().cpu()}, os.path.join(a.out, "inputs.safetensors"))
save_file({"o": torch.stack(os_).contiguous().cpu()}, os.path.join(a.out, "expect.safetensors"))
cfg.pop("$schema", None)
with open(os.path.join(a.out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
print(f"replay: {cfg['name']}: layers {L}, batch {B}, prompt {P}, decode {N}, head_dim {D}, "
      f"modifiers {[m['type'] for m in mods]}, torch {torch.__version__}")
