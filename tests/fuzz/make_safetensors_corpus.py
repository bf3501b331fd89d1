#!/usr/bin/env python3
"""Writes the seed inputs in tests/fuzz/corpus/safetensors/: small valid files and malformed ones.

Byte by byte from the format's description (https://github.com/huggingface/safetensors), with Python's
struct module only, so the C++ reader is checked against an independent writer. valid-* files must
load, invalid-* files must be rejected with a foundry error (tests/io/SafetensorsTest.cpp checks
both, and the values of valid-mixed-dtypes.safetensors). Run it from anywhere; it rewrites the files.
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def f16(values):
    return struct.pack("<%de" % len(values), *values)


def bf16(values):
    # The top half of each float32; the values below are exact in bfloat16.
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def file_bytes(header, data, pad=True):
    text = header if isinstance(header, (bytes, str)) else json.dumps(header, separators=(",", ":"))
    raw = text.encode() if isinstance(text, str) else text
    if pad:
        raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def tensors(entries, metadata=None):
    """entries: (name, dtype, shape, bytes) in data order."""
    header, data = {}, b""
    for name, dtype, shape, blob in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if metadata is not None:
        header["__metadata__"] = metadata
    return header, data


def write(name, blob):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)


def main():
    os.makedirs(OUT, exist_ok=True)
    # Values the C++ test checks: w = 0..5 in f32 [2, 3], h = [0.5, -1, 65504] in f16, b = [3, -0.125] in bf16.
    mixed_header, mixed_data = tensors(
        [("w", "F32", [2, 3], f32([0, 1, 2, 3, 4, 5])),
         ("h", "F16", [3], f16([0.5, -1.0, 65504.0])),
         ("b", "BF16", [1, 2], bf16([3.0, -0.125]))],
        metadata={"format": "pt", "producer": "make_safetensors_corpus.py"})
    write("valid-mixed-dtypes.safetensors", file_bytes(mixed_header, mixed_data))
    write("valid-empty.safetensors", file_bytes({}, b""))
    h, d = tensors([("scalar", "F32", [], f32([7.0])), ("nothing", "F16", [0, 4], b"")])
    write("valid-scalar-and-empty-tensor.safetensors", file_bytes(h, d))
    h, d = tensors([("x", "F32", [2], f32([1.0, 2.0]))])
    write("valid-unpadded-header.safetensors", file_bytes(h, d, pad=False))
    # What `foundry run --inputs` reads (q, k, v) beside a tensor it never reads.
    h, d = tensors([("q", "F16", [1, 1, 1, 2, 2], f16([1, 2, 3, 4])), ("k", "F16", [1, 1, 1, 1, 2], f16([5, 6])),
                    ("v", "F16", [1, 1, 1, 1, 2], f16([7, 8])), ("unused", "F32", [3], f32([0, 0, 0]))])
    write("valid-run-inputs.safetensors", file_bytes(h, d))

    good = file_bytes(mixed_header, mixed_data)
    write("invalid-short.safetensors", good[:5])
    write("invalid-header-past-end.safetensors", struct.pack("<Q", 4096) + good[8:64])
    write("invalid-header-over-limit.safetensors", struct.pack("<Q", 100_000_001) + good[8:])
    write("invalid-header-not-json.safetensors", file_bytes("{\"w\": [1, 2", b""))
    write("invalid-truncated-data.safetensors", good[:-3])
    write("invalid-trailing-bytes.safetensors", good + b"\0\0\0\0")
    h, d = tensors([("a", "F32", [2], f32([1, 2])), ("b", "F32", [2], f32([3, 4]))])
    h["b"]["data_offsets"] = [4, 12]
    write("invalid-overlap.safetensors", file_bytes(h, d + b"\0\0\0\0"))
    h, d = tensors([("a", "F32", [3], f32([1, 2]))])
    h["a"]["data_offsets"] = [0, 8]
    write("invalid-shape-mismatch.safetensors", file_bytes(h, d))
    h, d = tensors([("a", "F17", [2], f32([1, 2]))])
    write("invalid-unknown-dtype.safetensors", file_bytes(h, d))
    h, d = tensors([("a", "F32", [2], f32([1, 2]))])
    h["a"]["data_offsets"] = [8, 0]
    write("invalid-begin-after-end.safetensors", file_bytes(h, d))
    h, d = tensors([("a", "F32", [2 ** 32, 2 ** 32, 2], f32([1, 2]))])
    write("invalid-shape-overflow.safetensors", file_bytes(h, d))
    # An unused tensor whose bytes are not in the file: the header is checked whole, used or not.
    h, d = tensors([("q", "F32", [2], f32([1, 2])), ("unused", "F32", [2 ** 30], f32([0]))])
    h["unused"]["data_offsets"] = [8, 8 + 4 * 2 ** 30]
    write("invalid-unused-tensor-past-end.safetensors", file_bytes(h, d))
    write("invalid-duplicate-tensor.safetensors",
          file_bytes('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                     '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f32([1])))


if __name__ == "__main__":
    main()
