"""What bench/value_schedule_copies.py and bench/value_register_copies.py share: the tensor-core decode
kernel as committed at a revision, one exact text substitution, and the copies of kernels/ written under a
root (each NAME a copy of kernels/ with its decode_coopmat.glsl replaced)."""
import pathlib
import shutil
import subprocess

KERNEL = "flashattention/decode_coopmat.glsl"


def kernel_at(rev):
    return subprocess.check_output(["git", "show", f"{rev}:kernels/{KERNEL}"], text=True)


def sub(text, old, new, count=1):
    assert text.count(old) == count, (old[:60], text.count(old))
    return text.replace(old, new)


def write_copies(root, copies, names):
    for name in names or list(copies):
        d = pathlib.Path(root) / name
        if d.exists():
            shutil.rmtree(d)
        shutil.copytree("kernels", d)
        (d / KERNEL).write_text(copies[name])
        print("wrote", d / KERNEL)
