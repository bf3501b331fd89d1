#include "foundry/KvQuant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"

namespace foundry {

namespace {

constexpr std::int8_t kPoisonCode = -128;

// The dimension of `t` that counts keys (cache rows).
std::size_t keyAxis(const Tensor& t) {
  if (t.rank() == 4 && t.layout == Layout::KvCache) return 2;
  if (t.rank() == 4 && t.layout == Layout::TokenMajor) return 1;
  throw UserError(t.name, fmt::format("'{}' is {}; an {} cache is a kv-cache [B, Hkv, S, D] or token-major [B, S, Hkv, "
                                      "D] tensor", t.name, t.shapeString(), dtypeName(t.dtype)));
}

// The f16 at or above absmax / 127, so that no code is clipped at 127 and tiny blocks keep a scale; NaN
// for an infinity or a block beyond f16's range (codes cannot hold it). KvAppendStep's kvq_scale is the
// same, bit for bit.
float f16Scale(float absmax) {
  const float step = absmax / 127.0f;
  std::uint16_t h = floatToHalf(step);
  if (halfToFloat(h) < step) ++h;
  const float scale = halfToFloat(h);
  return std::isinf(absmax) || std::isinf(scale) ? std::numeric_limits<float>::quiet_NaN() : scale;
}

std::int8_t code(float x, float scale) {
  if (std::isnan(x)) return kPoisonCode;
  if (!(scale > 0.0f)) return 0;
  return static_cast<std::int8_t>(std::clamp(std::nearbyint(x / scale), -127.0f, 127.0f));
}

float value(std::int8_t c, float scale) {
  return c == kPoisonCode ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(c) * scale;
}

// Calls f(element index, scale cell) for every element of an int8 cache in packed order.
template <class F>
void forEachInt8(const Tensor& t, const Tensor& scales, F&& f) {
  const QuantBlocks& blocks = storageFormat(DType::I8).blocks;
  const std::size_t keys = keyAxis(t);
  const auto strides = Tensor::packedStrides(scales.dims);
  std::size_t at = 0;
  for (std::int64_t i0 = 0; i0 < t.dims[0]; ++i0) {
    for (std::int64_t i1 = 0; i1 < t.dims[1]; ++i1) {
      for (std::int64_t i2 = 0; i2 < t.dims[2]; ++i2) {
        const std::int64_t cell = i0 * strides[0] + (keys == 1 ? i1 / blocks.keys : i1) * strides[1] +
                                  (keys == 2 ? i2 / blocks.keys : i2) * strides[2];
        for (std::int64_t d = 0; d < t.dims[3]; ++d) f(at++, static_cast<std::size_t>(cell + d / blocks.dims));
      }
    }
  }
}

std::size_t elementsOf(std::span<const float> x, const Tensor& t) {
  if (!t.packed() || !quantized(t.dtype) || x.size() != static_cast<std::size_t>(t.numel())) {
    throw InternalError(fmt::format("the quantized codec takes a packed int8 or q8_0 tensor and its values, not {} "
                                    "and {} values", t.shapeString(), x.size()));
  }
  return x.size();
}

}  // namespace

Tensor scalesShape(const Tensor& values) {
  const QuantBlocks& blocks = storageFormat(DType::I8).blocks;
  const std::size_t keys = keyAxis(values);
  std::vector<std::int64_t> dims = values.dims;
  dims[keys] = (dims[keys] + blocks.keys - 1) / blocks.keys;
  dims[3] = (dims[3] + blocks.dims - 1) / blocks.dims;
  return Tensor::describe(values.name + ".scales", DType::F16, std::move(dims), values.layout);
}

std::uint64_t cacheBytes(DType format, std::uint64_t rows, std::uint64_t dim) {
  std::uint64_t bytes = storageBytes(format, rows * dim);
  const QuantBlocks& q = storageFormat(format).blocks;
  if (q.version && !q.inlineScales) bytes += (rows + q.keys - 1) / q.keys * ((dim + q.dims - 1) / q.dims) * 2;
  return bytes;
}

QuantizedBytes quantizeKv(std::span<const float> x, const Tensor& t) {
  const std::size_t n = elementsOf(x, t);
  QuantizedBytes q;
  if (t.dtype == DType::Q8_0) {
    if (n % 32 != 0) throw InternalError("q8_0 tensors hold whole blocks of 32");
    q.values.resize(n / 32 * 34);
    for (std::size_t b = 0; b < n / 32; ++b) {
      float absmax = 0;
      bool any = false;
      for (std::size_t i = 0; i < 32; ++i) {
        if (!std::isnan(x[b * 32 + i])) any = true, absmax = std::max(absmax, std::abs(x[b * 32 + i]));
      }
      const float scale = any ? f16Scale(absmax) : std::numeric_limits<float>::quiet_NaN();
      const std::uint16_t bits = floatToHalf(scale);
      std::memcpy(q.values.data() + b * 34, &bits, 2);
      for (std::size_t i = 0; i < 32; ++i) q.values[b * 34 + 2 + i] = std::byte(code(x[b * 32 + i], scale));
    }
    return q;
  }
  const Tensor scales = scalesShape(t);
  std::vector<float> absmax(static_cast<std::size_t>(scales.numel()), 0.0f);
  std::vector<bool> any(absmax.size(), false);
  forEachInt8(t, scales, [&](std::size_t i, std::size_t cell) {
    if (!std::isnan(x[i])) any[cell] = true, absmax[cell] = std::max(absmax[cell], std::abs(x[i]));
  });
  std::vector<float> scale(absmax.size());
  for (std::size_t c = 0; c < scale.size(); ++c) {
    scale[c] = any[c] ? f16Scale(absmax[c]) : std::numeric_limits<float>::quiet_NaN();
  }
  q.values.resize(n);
  forEachInt8(t, scales, [&](std::size_t i, std::size_t cell) { q.values[i] = std::byte(code(x[i], scale[cell])); });
  q.scales = encodeElements(scale, DType::F16);
  return q;
}

std::vector<float> dequantizeKv(const QuantizedBytes& q, const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<float> out(n);
  if (t.dtype == DType::Q8_0) {
    FOUNDRY_CHECK_INTERNAL(q.values.size() >= storageBytes(DType::Q8_0, n), "{} bytes of q8_0 for {} values",
                           q.values.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, q.values.data() + i / 32 * 34, 2);
      out[i] = value(static_cast<std::int8_t>(q.values[i / 32 * 34 + 2 + i % 32]), halfToFloat(bits));
    }
    return out;
  }
  const Tensor scales = scalesShape(t);
  const std::vector<float> scale = decodeElements(q.scales, DType::F16);
  FOUNDRY_CHECK_INTERNAL(q.values.size() >= n && scale.size() >= static_cast<std::size_t>(scales.numel()),
                         "{} codes and {} scales for {}", q.values.size(), scale.size(), t.shapeString());
  forEachInt8(t, scales, [&](std::size_t i, std::size_t cell) {
    out[i] = value(static_cast<std::int8_t>(q.values[i]), scale[cell]);
  });
  return out;
}

}  // namespace foundry
