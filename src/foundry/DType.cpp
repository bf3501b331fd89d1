#include "foundry/DType.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::U32: return "u32";
    case DType::I8: return "int8";
    case DType::Q8_0: return "q8_0";
    case DType::I32: return "i32";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  if (name == "f16" || name == "float16" || name == "fp16") return DType::F16;
  if (name == "f32" || name == "float32" || name == "fp32") return DType::F32;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  if (name == "int8" || name == "i8") return DType::I8;
  if (name == "q8_0") return DType::Q8_0;
  return std::nullopt;
}

std::size_t dtypeBytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::U32:
    case DType::I32: return 4;
    case DType::I8: return 1;
    case DType::Q8_0: throw InternalError("q8_0 elements are not whole bytes: size q8_0 tensors with storageBytes");
    default: return 2;
  }
}

std::uint64_t storageBytes(DType dtype, std::uint64_t elements) {
  if (dtype == DType::Q8_0) return (elements + 31) / 32 * 34;
  return elements * dtypeBytes(dtype);
}

bool quantized(DType dtype) { return dtype == DType::I8 || dtype == DType::Q8_0; }

std::string_view glslScalarType(DType dtype) {
  switch (dtype) {
    case DType::F16: return "float16_t";
    case DType::F32: return "float";
    case DType::BF16: return "uint16_t";  // bits only: kernels widen with StorageFormat.h's glsl::read
    case DType::U32: return "uint";
    case DType::I32: return "int";
    case DType::I8: return "uint";       // four values per word
    case DType::Q8_0: return "uint16_t";  // blocks of 17 words: the scale, then 16 pairs of values
  }
  return "float";
}

std::uint16_t floatToHalf(float value) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t absf = f & 0x7fffffffu;
  if (absf >= 0x7f800000u) {  // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absf > 0x7f800000u ? 0x200u : 0u));
  }
  if (absf >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (absf < 0x38800000u) {  // subnormal half or zero
    if (absf < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (absf & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absf >> 23);  // 14..24
    const std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t mid = 1u << (shift - 1);
    const std::uint32_t rounded = half + ((rem > mid || (rem == mid && (half & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | rounded);
  }
  const std::uint32_t exp = ((absf >> 23) - 112u) << 10;
  const std::uint32_t mant = (absf >> 13) & 0x3ffu;
  std::uint32_t half = exp | mant;
  const std::uint32_t rem = absf & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

float halfToFloat(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  std::uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      std::uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      out = sign | ((112u - static_cast<std::uint32_t>(e)) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t floatToBFloat16(float value) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((f >> 16) | 0x40u);
  f += 0x7fffu + ((f >> 16) & 1u);
  return static_cast<std::uint16_t>(f >> 16);
}

float bfloat16ToFloat(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::vector<std::byte> encodeElements(std::span<const float> values, DType dtype) {
  if (quantized(dtype)) throw InternalError(fmt::format("{} values are encoded in blocks (foundry/KvQuant.h)", dtypeName(dtype)));
  std::vector<std::byte> out(values.size() * dtypeBytes(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else if (dtype == DType::U32) {
      const auto u = static_cast<std::uint32_t>(std::max(0.0f, values[i]));
      std::memcpy(out.data() + 4 * i, &u, 4);
    } else {
      const std::uint16_t h = dtype == DType::F16 ? floatToHalf(values[i]) : floatToBFloat16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<float> decodeElements(std::span<const std::byte> bytes, DType dtype) {
  if (quantized(dtype)) throw InternalError(fmt::format("{} values are decoded in blocks (foundry/KvQuant.h)", dtypeName(dtype)));
  const std::size_t width = dtypeBytes(dtype);
  if (bytes.size() % width != 0) {
    throw InternalError("decodeElements: byte count is not a multiple of the element size");
  }
  std::vector<float> out(bytes.size() / width);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else if (dtype == DType::U32) {
      std::uint32_t u;
      std::memcpy(&u, bytes.data() + 4 * i, 4);
      out[i] = static_cast<float>(u);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = dtype == DType::F16 ? halfToFloat(h) : bfloat16ToFloat(h);
    }
  }
  return out;
}

}  // namespace foundry
