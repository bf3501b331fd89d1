#pragma once
// Quantized KV caches on the host: the shape of an int8 cache's scales, and the codec Runtime's
// upload and download use (tests, and applications that fill a cache from the CPU). The block shape
// comes from the format's versioned descriptor (StorageFormat.h's QuantBlocks); the kernels read
// the same blocks through KvAccessStage and KvAppendStep writes them with the same policy: a block's
// scale is the f16 at or above its largest |value| / 127, and each value the nearest code in -127..127.
#include <cstddef>
#include <span>
#include <vector>

#include "foundry/Tensor.h"

namespace foundry {

/// How far attention over a quantized cache may lie from attention over the values before
/// quantization, relative to the largest |output|: `foundry run --check`'s default and the tests'.
/// Each code is within half a step (1/254 of its block's largest |value|) of its value, but K's codes
/// move logits too, so the distance grows with how peaked the softmax is: up to 1.54e-2 measured on
/// the tests' inputs (q and k of magnitude 4, 2026-12-03), 1.8e-2 where a block's scale grows over 128
/// single-token appends (docs/attention.md, "Quantized caches").
inline constexpr double kQuantizedAttentionBound = 2e-2;

/// The f16 scales of an int8 cache: kv-cache [B, Hkv, S, D] -> [B, Hkv, ceil(S / 32), ceil(D / 32)],
/// token-major [B, S, Hkv, D] -> [B, ceil(S / 32), Hkv, ceil(D / 32)]; UserError for another layout.
Tensor scalesShape(const Tensor& values);

/// Bytes of a packed cache of `rows` rows of `dim` values in `format`, an int8 cache's scales included
/// (rows a multiple of 32 counts whole blocks).
std::uint64_t cacheBytes(DType format, std::uint64_t rows, std::uint64_t dim);

struct QuantizedBytes {
  std::vector<std::byte> values;  ///< int8 codes, or q8_0 blocks
  std::vector<std::byte> scales;  ///< int8: the f16 scales in scalesShape's packed order; q8_0: empty
};

/// Quantizes `x`, in `t`'s packed element order (t: I8 or Q8_0, packed). NaN values are left out of
/// their block's scale and stored as the code -128; a block of NaN only, or with an infinity, gets a NaN
/// scale. The kernels read -128 as -128 x scale: a NaN in a row they read must come through
/// KvAppendStep, whose quantization gives the block a NaN scale (this codec's NaN marks unwritten rows).
QuantizedBytes quantizeKv(std::span<const float> x, const Tensor& t);
/// The values the kernels see: code * scale (-128 decodes as NaN: what quantizeKv made of a NaN).
std::vector<float> dequantizeKv(const QuantizedBytes& q, const Tensor& t);

}  // namespace foundry
