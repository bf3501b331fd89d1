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

/// How a quantized format groups its values under one scale. Versioned: the kernels, KvAppendStep's
/// quantizer and the host codec (foundry/KvQuant.h) all read the block shape from here, and a cache is
/// read under the version it was written with.
struct QuantBlocks {
  std::uint32_t version = 0;  ///< 0: not quantized
  std::uint32_t keys = 0;     ///< consecutive cache rows sharing one scale
  std::uint32_t dims = 0;     ///< consecutive dimensions of a row sharing one scale
  bool inlineScales = false;  ///< the f16 scale precedes its values in the block (q8_0), else Tensor::scales
};

struct StorageFormat {
  DType dtype;
  std::uint32_t bytes;           ///< per element (q8_0: plus a 2-byte scale per 32)
  std::string_view glslScalar;   ///< a buffer's element type in the kernels' view of it
  bool needs16BitStorage;        ///< the device must offer 16-bit storage-buffer access (f16 scales too)
  std::uint32_t maxLoadWidth;    ///< most elements one vector load takes (16 bytes)
  std::uint64_t nanBits;         ///< a quiet NaN in this format (outputs are poisoned with it); u32: all ones;
                                 ///< int8: -128, a code the quantizer never writes
  std::uint32_t fillWord;        ///< the poison as a 32-bit fill pattern (q8_0: NaN scales)
  QuantBlocks blocks;            ///< quantized formats only
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
/// or "vec2" for 2, "uvec2" or "vec4" for 4, "uvec4" for 8 (16-bit formats only). int8: "uint" up to
/// 4, "uvec2" for 8, "uvec4" for 16; q8_0: "uint16_t" (its loads are assembled by KvAccessStage).
std::string view(DType dtype, std::uint32_t width);
/// A GLSL expression widening chunk `p` (of min(width, 4) elements, or of `chunk` where given: 2, one
/// word of a 16-bit load) of a register `r` in view(dtype, width) to f32: vec2 or vec4. Width 2 or
/// more: a single element is widened by read() as it is loaded.
std::string unpack(DType dtype, std::uint32_t width, std::uint32_t chunk = 0);
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
