#pragma once
// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {string: string}}, then the data, offsets relative to its start. Foundry reads and writes F16, F32
// and BF16 tensors.
//
// Reading is strict, as the format's reference implementation is: the tensors must cover the data
// exactly (no overlaps, no holes, no trailing bytes), each tensor's byte count must equal its shape's
// element count times its dtype's size, and the header must be one JSON object without duplicate keys,
// at most kMaxSafetensorsHeaderBytes long. A malformed file is a UserError (field: the JSON pointer of
// the header entry at fault, or "" for the file as a whole; the message ends with "(in <file>)"); a
// well-formed tensor of a dtype Foundry does not read (F64, I8, ...) an UnsupportedError.
//
// The header is checked whole (every name, dtype, shape and offset, against the file's size) before
// any tensor is read, and SafetensorsReader then reads only the tensors asked for: a file may hold a
// tensor larger than memory that a run never reads. Memory that cannot be had for a tensor asked for,
// or a read the system refuses, is a DeviceError naming the tensor and the file.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "foundry/DType.h"

namespace foundry {

/// The format's own limit on the header: larger ones are rejected before anything is allocated.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// One tensor as stored: dtype, shape (row-major) and its little-endian bytes.
struct SafetensorsTensor {
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::vector<std::byte> bytes;

  std::int64_t numel() const;
  /// The elements converted to float (exact for F16, BF16 and F32).
  std::vector<float> floats() const;
};

/// A whole file: tensors by name and the optional "__metadata__" map.
struct SafetensorsFile {
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string origin;  ///< the path (or name) it was read from, for errors

  /// The tensor called `name`; a UserError naming it, the file and the tensors present if there is
  /// none, whose field is `field` (the flag that named the file, say) or else the tensor's name.
  const SafetensorsTensor& tensor(std::string_view name, std::string_view field = {}) const;
  /// tensor(name).floats().
  std::vector<float> floats(std::string_view name) const;
};

/// One tensor as the header declares it: what it holds and where its bytes lie in the data.
struct SafetensorsEntry {
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< offsets into the data, checked against the file's size
};

/// A file whose header has been read and checked; tensors are read one at a time, when asked for.
class SafetensorsReader {
 public:
  /// Reads and checks the header of `path` and keeps the file open for read(). A file that cannot be
  /// opened is a UserError naming the path.
  static SafetensorsReader open(const std::filesystem::path& path);
  /// The same over a file held in memory, which must outlive the reader. `origin` names it in errors.
  static SafetensorsReader fromMemory(std::span<const std::byte> file, std::string origin);

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& origin() const { return origin_; }

  /// The entry called `name`; a UserError naming it, the file and the tensors present if there is
  /// none, whose field is `field` (the flag that named the file, say) or else the tensor's name.
  const SafetensorsEntry& entry(std::string_view name, std::string_view field = {}) const;
  /// Reads the bytes of tensor `name` (entry() first).
  SafetensorsTensor read(std::string_view name, std::string_view field = {}) const;
  /// Every tensor read.
  SafetensorsFile readAll() const;

  struct Source;  ///< where the bytes come from: a file descriptor or memory

 private:
  static SafetensorsReader withSource(std::shared_ptr<const Source> source, std::string origin);

  std::shared_ptr<const Source> source_;
  std::uint64_t dataStart_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  std::string origin_;
};

/// Parses a whole file held in memory. `origin` names it in errors. Throws UserError / UnsupportedError
/// (and DeviceError where memory runs out).
SafetensorsFile parseSafetensors(std::span<const std::byte> file, const std::string& origin);
/// Reads a whole file: SafetensorsReader::open(path).readAll().
SafetensorsFile readSafetensors(const std::filesystem::path& path);

/// A float tensor to write; `values` holds product(shape) elements, row-major.
struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

/// The bytes of a safetensors file holding `tensors` converted to `dtype` (data in the given order,
/// header padded with spaces to a multiple of 8 bytes). Bad names or shapes are UserErrors.
std::vector<std::byte> encodeSafetensors(std::span<const NamedTensor> tensors, DType dtype,
                                         const std::map<std::string, std::string>& metadata = {});
/// encodeSafetensors() written with writeFileAtomically(): the file is whole or absent.
void writeSafetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors, DType dtype,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace foundry
