#pragma once
// How each element type sits in a buffer and how kernels read and write it: the one description the
// stages, the Steps' checks and the tests' NaN poison take their answers from.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "foundry/DType.h"

namespace foundry {

struct DeviceInfo;
class KernelInterface;

struct StorageFormat {
  DType dtype;
  std::uint32_t bytes;           ///< per element
  std::string_view glslScalar;   ///< a buffer's element type for one value at a time
  bool needs16BitStorage;        ///< the device must offer 16-bit storage-buffer access
  std::uint32_t maxLoadWidth;    ///< most elements one vector load takes (16 bytes)
  std::uint64_t nanBits;         ///< a quiet NaN in this format (outputs are poisoned with it); u32: all ones
};

/// The description of a format (u32, an index type, included for its size and poison).
const StorageFormat& storageFormat(DType dtype);

/// Why `device` cannot hold `dtype` tensors in the buffers an attention kernel reads and writes, or
/// empty: the one rule every Step checks.
std::string unsupportedStorageReason(DType dtype, const DeviceInfo& device);
/// UnsupportedError naming `field`, the format and the device, where unsupportedStorageReason says so.
void requireStorage(DType dtype, const DeviceInfo& device, std::string_view field);

/// The bytes of one NaN element of `dtype`, repeated `count` times.
std::vector<std::byte> nanPoison(DType dtype, std::size_t count);

namespace glsl {

/// A buffer view that loads `width` elements at once: "float16_t"/"uint16_t"/"float" for 1, "uint"
/// or "vec2" for 2, "uvec2" or "vec4" for 4, "uvec4" for 8 (16-bit formats only).
std::string view(DType dtype, std::uint32_t width);
/// A GLSL expression widening chunk `p` (of min(width, 4) elements) of a register `r` in view(dtype,
/// width) to f32: vec2 or vec4. Width 2 or more: a single element is widened by read() as it is loaded.
std::string unpack(DType dtype, std::uint32_t width);
/// A GLSL expression: the f32 value of one element `element` (an expression in glslScalar).
std::string read(DType dtype, std::string_view element);
/// A GLSL expression converting the f32 `value` to a storable output element: f16 clamped to its
/// finite range, bf16 rounded to nearest even, f32 as is.
std::string write(DType dtype, std::string_view value);
/// The same conversion without the clamp, for data rather than results (KV rows: a NaN or an
/// infinity a caller wrote stays one).
std::string convert(DType dtype, std::string_view value);
/// The snippet read() and write() need for this format ("" when none).
std::string_view snippet(DType dtype);
/// Adds that snippet to a stage that reads or writes `dtype` elements.
void declareFormat(KernelInterface& k, DType dtype);
/// Defines the macro `name(x)` as read(dtype, x) (e.g. Q_READ), with its snippet.
void declareRead(KernelInterface& k, const std::string& name, DType dtype);
/// Defines the macro `name(x)` as write(dtype, x) (e.g. OUT_STORE), with its snippet.
void declareWrite(KernelInterface& k, const std::string& name, DType dtype);

}  // namespace glsl
}  // namespace foundry
