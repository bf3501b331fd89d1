#include "foundry/StorageFormat.h"

#include <cstring>

#include <fmt/format.h>

#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"
#include "foundry/KernelInterface.h"

namespace foundry {

namespace {

// bf16 keeps f32's exponent: every bf16 value widens exactly, and none overflows in f32 arithmetic.
// int8 (version 1): symmetric, scale = absmax / 127 per block of 32 keys x 32 dimensions, f16 scales
// beside the values; q8_0: llama.cpp's block of one row's 32 dimensions, the f16 scale first.
constexpr StorageFormat kFormats[] = {
    {DType::F16, 2, "float16_t", true, 8, 0x7e00, 0x7e007e00u, {}},
    {DType::F32, 4, "float", false, 4, 0x7fc00000, 0x7fc00000u, {}},
    {DType::BF16, 2, "uint16_t", true, 8, 0x7fc0, 0x7fc07fc0u, {}},
    {DType::U32, 4, "uint", false, 4, 0xffffffff, 0xffffffffu, {}},  // indices: the "NaN" is past every length
    {DType::I8, 1, "uint", true, 16, 0x80, 0x80808080u, {1, 32, 32, false}},
    {DType::Q8_0, 1, "uint16_t", true, 16, 0x80, 0x7e007e00u, {1, 1, 32, true}},
};

}  // namespace

const StorageFormat& storageFormat(DType dtype) {
  for (const auto& f : kFormats) {
    if (f.dtype == dtype) return f;
  }
  throw InternalError(fmt::format("no storage format for {} tensors", dtypeName(dtype)));
}

std::string unsupportedStorageReason(DType dtype, const DeviceInfo& device) {
  if (dtype == DType::U32) return "u32 is an index type, not an attention format; accepted: f16, bf16, f32";
  if (storageFormat(dtype).needs16BitStorage && !device.storage16Bit) {
    if (quantized(dtype)) {
      return fmt::format("device '{}' cannot read the f16 scales of {} blocks (no storageBuffer16BitAccess); use f32",
                         device.name, dtypeName(dtype));
    }
    return fmt::format("device '{}' cannot store 16-bit values in buffers (no storageBuffer16BitAccess); use f32",
                       device.name);
  }
  return {};
}

void requireStorage(DType dtype, const DeviceInfo& device, std::string_view field) {
  const std::string reason = unsupportedStorageReason(dtype, device);
  if (!reason.empty()) throw UnsupportedError(fmt::format("{}: {} tensors: {}", field, dtypeName(dtype), reason));
}

std::vector<std::byte> nanPoison(DType dtype, std::size_t count) {
  const StorageFormat& f = storageFormat(dtype);
  FOUNDRY_CHECK_INTERNAL(dtype != DType::Q8_0, "q8_0 is poisoned block by block (fillWord), not per element");
  std::vector<std::byte> out(count * f.bytes);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(out.data() + i * f.bytes, &f.nanBits, f.bytes);  // little endian
  return out;
}

namespace glsl {

std::string view(DType dtype, std::uint32_t width) {
  const StorageFormat& f = storageFormat(dtype);
  FOUNDRY_CHECK_INTERNAL(width >= 1 && width <= f.maxLoadWidth && (width & (width - 1)) == 0,
                         "{}-element loads of {}", width, dtypeName(dtype));
  if (dtype == DType::Q8_0) return "uint16_t";
  if (dtype == DType::I8) return width <= 4 ? "uint" : width == 8 ? "uvec2" : "uvec4";
  if (width == 1) return std::string(f.glslScalar);
  if (f.bytes == 2) return width == 2 ? "uint" : width == 4 ? "uvec2" : "uvec4";
  return width == 2 ? "vec2" : "vec4";
}

std::string unpack(DType dtype, std::uint32_t width, std::uint32_t chunk) {
  FOUNDRY_CHECK_INTERNAL(!quantized(dtype), "{} loads are unpacked by KvAccessStage, with their scales", dtypeName(dtype));
  FOUNDRY_CHECK_INTERNAL(width >= 2, "a single {} element is widened as it is loaded, not unpacked", dtypeName(dtype));
  FOUNDRY_CHECK_INTERNAL(chunk == 0 || (chunk == 2 && storageFormat(dtype).bytes == 2),
                         "{}-element chunks of {} loads", chunk, dtypeName(dtype));
  if (dtype == DType::F32) return "(r)";
  const char* pair = dtype == DType::F16 ? "unpackHalf2x16" : "bf16x2_to_f32";
  if (chunk == 2) return width == 2 ? fmt::format("{}(r)", pair) : fmt::format("{}((r)[p])", pair);
  switch (width) {
    case 8:
      return fmt::format("((p) == 0u ? vec4({0}((r).x), {0}((r).y)) : vec4({0}((r).z), {0}((r).w)))", pair);
    case 4: return fmt::format("vec4({0}((r).x), {0}((r).y))", pair);
    default: return fmt::format("{}(r)", pair);
  }
}

std::string read(DType dtype, std::string_view element) {
  FOUNDRY_CHECK_INTERNAL(!quantized(dtype), "{} values are read by KvAccessStage, with their scales", dtypeName(dtype));
  if (dtype == DType::BF16) return fmt::format("bf16_to_f32(uint({}))", element);
  return fmt::format("float({})", element);
}

std::string write(DType dtype, std::string_view value) {
  FOUNDRY_CHECK_INTERNAL(!quantized(dtype), "{} values are written by KvAppendStep's quantizer", dtypeName(dtype));
  switch (dtype) {
    case DType::F16: return fmt::format("float16_t(clamp_to_half({}))", value);
    case DType::BF16: return fmt::format("uint16_t(bf16_bits({}))", value);
    default: return fmt::format("({})", value);
  }
}

std::string convert(DType dtype, std::string_view value) {
  return dtype == DType::F16 ? fmt::format("float16_t({})", value) : write(dtype, value);
}

std::string_view snippet(DType dtype) {
  switch (dtype) {
    case DType::BF16: return "common/bf16.glsl";
    case DType::F16: return "common/half.glsl";
    case DType::I8:
    case DType::Q8_0: return "common/int8.glsl";
    default: return "";
  }
}

void declareFormat(KernelInterface& k, DType dtype) {
  if (!snippet(dtype).empty()) k.snippet(std::string(snippet(dtype)));
}

void declareRead(KernelInterface& k, const std::string& name, DType dtype) {
  k.define(name + "(x)", read(dtype, "x"));
  declareFormat(k, dtype);
}

void declareWrite(KernelInterface& k, const std::string& name, DType dtype) {
  k.define(name + "(x)", write(dtype, "x"));
  declareFormat(k, dtype);
}

}  // namespace glsl
}  // namespace foundry
