"""Copies of kernels/ with the tensor-core int8 decode's V built in registers (FOUNDRY_FA_DECODE_VALUE_REGISTERS,
decode_coopmat.glsl's DC_VREGS) changed, for bench/value_schedule_check.sh (COPIES):
  vfirst  a tile's next V rows loaded before its K rows are staged and its next K rows loaded.
Usage (from the repository root, before packing): python3 bench/value_register_copies.py .device/kx [NAME...]
"""
import pathlib
import shutil
import sys

root = pathlib.Path(sys.argv[1])
src = pathlib.Path("kernels")
K = "flashattention/decode_coopmat.glsl"
base = (src / K).read_text()


def sub(text, old, new, count=1):
    assert text.count(old) == count, (old[:60], text.count(old))
    return text.replace(old, new)


regs_loads = """#if DC_VREGS
        values[p] = ring[r0 + p].v;
        if (more[p]) dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
#endif
"""
vfirst = sub(base, regs_loads, "")
vfirst = sub(vfirst, "        more[p] = t + DC_RING * stride < kv_end;\n", """        more[p] = t + DC_RING * stride < kv_end;
#if DC_VREGS
        values[p] = ring[r0 + p].v;
        if (more[p]) {
          ring[r0 + p].seq = kv_seq(b, t + DC_RING * stride);
          dc_load_values(t + DC_RING * stride, last, b, kv_h, ring[r0 + p]);
        }
#endif
""")

copies = {"vfirst": vfirst}
for name in sys.argv[2:] or list(copies):
    d = root / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    (d / K).write_text(copies[name])
    print("wrote", d / K)
