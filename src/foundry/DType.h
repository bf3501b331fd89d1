#pragma once
// Element types of tensors and their host-side conversions.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace foundry {

/// U32 holds indices and lengths (per-sequence key lengths, bit masks); host values convert exactly
/// up to 2^24. I8 and Q8_0 are KV cache formats only, quantized in blocks (foundry/KvQuant.h): I8 is
/// int8 values with f16 scales in a companion tensor (Tensor::scales), Q8_0 is llama.cpp's block of 32
/// int8 values after their own f16 scale (34 bytes).
/// I32 only describes int8 cooperative-matrix accumulators (DeviceInfo's shapes): no tensor or cache is i32.
enum class DType { F16, F32, BF16, U32, I8, Q8_0, I32 };

std::string_view dtypeName(DType dtype);          ///< "f16", "f32", "bf16", "u32"
std::optional<DType> parseDType(std::string_view name);
/// Bytes per element; InternalError for Q8_0, whose elements are not whole bytes (use storageBytes).
std::size_t dtypeBytes(DType dtype);
/// Bytes `elements` elements take (Q8_0: whole blocks of 32, 34 bytes each).
std::uint64_t storageBytes(DType dtype, std::uint64_t elements);
/// Whether the format is quantized in blocks (I8, Q8_0).
bool quantized(DType dtype);
std::string_view glslScalarType(DType dtype);      ///< "float16_t", "float", "uint16_t" (bf16), "uint"

/// IEEE binary16 conversion with round-to-nearest-even; overflow becomes +-inf, as hardware does.
std::uint16_t floatToHalf(float value);
float halfToFloat(std::uint16_t bits);
std::uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(std::uint16_t bits);

/// Encodes floats as `dtype` bytes (little endian), and back.
std::vector<std::byte> encodeElements(std::span<const float> values, DType dtype);
std::vector<float> decodeElements(std::span<const std::byte> bytes, DType dtype);

/// Largest finite f16 value.
inline constexpr float kHalfMax = 65504.0f;

}  // namespace foundry
