#include "foundry/runner/io/Safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/runner/io/Json.h"

namespace foundry {

// Elements are copied as they lie in memory; the format is little endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kLengthBytes = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

struct Entry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

class Problems {
 public:
  explicit Problems(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw UserError(field, fmt::format("{} (in {})", message, origin_));
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& message) const {
    throw UnsupportedError(fmt::format("{}: {} (in {})", field, message, origin_));
  }
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

std::string_view safetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::U32: return "U32";
    case DType::I8: return "I8";
    case DType::I32: return "I32";
    case DType::Q8_0: return "?";  // no safetensors name: a llama.cpp block format
  }
  return "?";
}

DType readDType(const Problems& p, const json& v, const std::string& field) {
  // Every dtype the format defines; Foundry reads the float ones it computes with.
  static constexpr std::string_view kOtherFormatDTypes[] = {"BOOL", "U8",  "I8",  "U16",     "I16",     "U32",
                                                            "I32",  "U64", "I64", "F64",     "F8_E4M3", "F8_E5M2",
                                                            "C64",  "F4",  "F6_E2M3", "F6_E3M2", "F8_E8M0"};
  if (!v.is_string()) p.fail(field, fmt::format("expected a dtype string, found {}", describeJsonValue(v)));
  const auto& s = v.get_ref<const std::string&>();
  for (const DType d : {DType::F16, DType::F32, DType::BF16}) {
    if (s == safetensorsDTypeName(d)) return d;
  }
  if (std::find(std::begin(kOtherFormatDTypes), std::end(kOtherFormatDTypes), s) != std::end(kOtherFormatDTypes)) {
    p.unsupported(field, fmt::format("dtype {} is not supported; supported: F16, F32, BF16", s));
  }
  p.fail(field, fmt::format("unknown dtype {}; supported: F16, F32, BF16", quoteForMessage(s)));
}

std::vector<std::int64_t> readShape(const Problems& p, const json& v, const std::string& field) {
  if (!v.is_array()) p.fail(field, fmt::format("expected an array of dimensions, found {}", describeJsonValue(v)));
  std::vector<std::int64_t> shape;
  shape.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& d = v[i];
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
      p.fail(field + "/" + std::to_string(i),
             fmt::format("expected a dimension from 0 to 2^63-1, found {}", describeJsonValue(d)));
    }
    shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
  }
  return shape;
}

/// Bytes a tensor of `shape` and `dtype` occupies, or nothing if that does not fit in 64 bits.
std::optional<std::uint64_t> byteCount(std::span<const std::int64_t> shape, DType dtype) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::uint64_t n = dtypeBytes(dtype);
  for (const auto d : shape) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

std::string shapeString(std::span<const std::int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Entry readEntry(const Problems& p, const std::string& name, const json& v, std::uint64_t dataBytes) {
  const std::string at = jsonPointerAppend("", name);
  if (!v.is_object()) {
    p.fail(at, fmt::format("tensor {}: expected an object with dtype, shape and data_offsets, found {}",
                           quoteForMessage(name), describeJsonValue(v)));
  }
  for (const auto& item : v.items()) {
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets") {
      p.fail(jsonPointerAppend(at, item.key()),
             fmt::format("tensor {}: unknown key {}; accepted: dtype, shape, data_offsets", quoteForMessage(name),
                         quoteForMessage(item.key())));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(key)) {
      p.fail(jsonPointerAppend(at, key), fmt::format("tensor {}: missing key \"{}\"", quoteForMessage(name), key));
    }
  }
  Entry e;
  e.name = name;
  e.dtype = readDType(p, v.at("dtype"), at + "/dtype");
  e.shape = readShape(p, v.at("shape"), at + "/shape");

  const json& off = v.at("data_offsets");
  const std::string offAt = at + "/data_offsets";
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
    p.fail(offAt, fmt::format("tensor {}: expected data_offsets [begin, end] of non-negative integers, found {}",
                              quoteForMessage(name), off.is_array() ? off.dump(-1, ' ', true) : describeJsonValue(off)));
  }
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.begin > e.end) {
    p.fail(offAt, fmt::format("tensor {}: begin {} is after end {}", quoteForMessage(name), e.begin, e.end));
  }
  if (e.end > dataBytes) {
    p.fail(offAt, fmt::format("tensor {}: offsets [{}, {}) run past the end of the data ({} bytes)",
                              quoteForMessage(name), e.begin, e.end, dataBytes));
  }
  const auto need = byteCount(e.shape, e.dtype);
  if (!need) {
    p.fail(at + "/shape", fmt::format("tensor {}: shape {} has more bytes than fit in 64 bits", quoteForMessage(name),
                                      shapeString(e.shape)));
  }
  if (*need != e.end - e.begin) {
    p.fail(offAt, fmt::format("tensor {}: holds {} bytes but shape {} of {} needs {}", quoteForMessage(name),
                              e.end - e.begin, shapeString(e.shape), safetensorsDTypeName(e.dtype), *need));
  }
  return e;
}

std::map<std::string, std::string> readMetadata(const Problems& p, const json& v) {
  const std::string at = jsonPointerAppend("", kMetadataKey);
  if (!v.is_object()) {
    p.fail(at, fmt::format("__metadata__: expected an object of strings, found {}", describeJsonValue(v)));
  }
  std::map<std::string, std::string> out;
  for (const auto& item : v.items()) {
    if (!item.value().is_string()) {
      p.fail(jsonPointerAppend(at, item.key()),
             fmt::format("__metadata__: expected a string, found {}", describeJsonValue(item.value())));
    }
    out.emplace(item.key(), item.value().get<std::string>());
  }
  return out;
}

// The tensors must tile the data: sorted by offset, each starts where the previous ended.
void checkCoverage(const Problems& p, std::vector<Entry>& entries, std::uint64_t dataBytes) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  std::uint64_t cursor = 0;
  const Entry* previous = nullptr;
  for (const auto& e : entries) {
    if (e.begin < cursor) {
      p.fail(jsonPointerAppend("", e.name) + "/data_offsets",
             fmt::format("tensor {} [{}, {}) overlaps tensor {} [{}, {})", quoteForMessage(e.name), e.begin, e.end,
                         quoteForMessage(previous->name), previous->begin, previous->end));
    }
    if (e.begin > cursor) {
      p.fail("", fmt::format("bytes [{}, {}) of the data belong to no tensor", cursor, e.begin));
    }
    cursor = e.end;
    previous = &e;
  }
  if (cursor != dataBytes) {
    p.fail("", fmt::format("bytes [{}, {}) at the end of the data belong to no tensor", cursor, dataBytes));
  }
}

Header readHeader(const Problems& p, std::string_view text, std::uint64_t dataBytes) {
  if (text.empty() || text.front() != '{') p.fail("", "header does not start with '{'");
  json doc;
  try {
    doc = parseJsonStrict(text, "");
  } catch (const UserError& e) {
    const std::string what = e.what();
    const std::string prefix = e.field() + ": ";
    p.fail(e.field(), fmt::format("header is not valid JSON: {}",
                                  !e.field().empty() && what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
  }
  if (!doc.is_object()) p.fail("", fmt::format("header must be a JSON object, found {}", describeJsonValue(doc)));
  Header h;
  for (const auto& item : doc.items()) {
    if (item.key() == kMetadataKey) h.metadata = readMetadata(p, item.value());
    else h.entries.push_back(readEntry(p, item.key(), item.value(), dataBytes));
  }
  checkCoverage(p, h.entries, dataBytes);
  return h;
}

// byName[name]; a UserError naming it, the file and the tensors present if there is none.
template <class Value>
const Value& findTensor(const std::map<std::string, Value>& byName, std::string_view name, std::string_view field,
                        const std::string& origin) {
  const auto it = byName.find(std::string(name));
  if (it != byName.end()) return it->second;
  std::vector<std::string> present;
  for (const auto& item : byName) present.push_back(quoteForMessage(item.first));
  throw UserError(std::string(field.empty() ? name : field),
                  fmt::format("no tensor {}; the file holds: {}{}", quoteForMessage(name),
                              present.empty() ? "nothing" : fmt::format("{}", fmt::join(present, ", ")),
                              origin.empty() ? "" : fmt::format(" (in {})", origin)));
}

// A vector of `bytes` bytes; memory the system cannot give is a DeviceError saying what it was for.
std::vector<std::byte> allocateBytes(const Problems& p, std::uint64_t bytes, const std::string& what) {
  try {
    return std::vector<std::byte>(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw DeviceError(fmt::format("cannot allocate {} bytes to read {} (in {})", bytes, what, p.origin()));
}

}  // namespace

struct SafetensorsReader::Source {
  virtual ~Source() = default;
  /// Fills `dst` from `offset`, which the header checks have kept within size.
  virtual void readAt(std::uint64_t offset, std::span<std::byte> dst) const = 0;
  std::uint64_t size = 0;
};

namespace {

class MemorySource : public SafetensorsReader::Source {
 public:
  explicit MemorySource(std::span<const std::byte> file) : file_(file) { size = file.size(); }
  void readAt(std::uint64_t offset, std::span<std::byte> dst) const override {
    if (offset > file_.size() || dst.size() > file_.size() - offset) {
      throw InternalError(fmt::format("safetensors: read of {} bytes at {} past {} bytes", dst.size(), offset,
                                      file_.size()));
    }
    if (!dst.empty()) std::memcpy(dst.data(), file_.data() + offset, dst.size());
  }

 private:
  std::span<const std::byte> file_;
};

class FileSource : public SafetensorsReader::Source {
 public:
  explicit FileSource(const Problems& p) : p_(p) {
    std::error_code ec;
    if (std::filesystem::is_directory(p.origin(), ec)) p.fail("", "cannot read: it is a directory");
    fd_ = openForReading(p.origin());  // a FIFO is refused below, never waited on
    if (fd_ < 0) p.fail("", fmt::format("cannot read: {}", std::strerror(errno)));
    struct ::stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      p.fail("", fmt::format("cannot read: it is {}; a safetensors file is read in place, so it must be a regular file",
                             nonRegularFile(p.origin()).value_or("not a regular file")));
    }
    size = static_cast<std::uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  void readAt(std::uint64_t offset, std::span<std::byte> dst) const override {
    std::size_t done = 0;
    while (done < dst.size()) {
      const ssize_t n = ::pread(fd_, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        throw DeviceError(fmt::format("cannot read {} bytes at offset {}: {} (in {})", dst.size(), offset,
                                      std::strerror(errno), p_.origin()));
      }
      if (n == 0) {
        p_.fail("", fmt::format("cannot read {} bytes at offset {}: the file is shorter than when it was opened",
                                dst.size(), offset));
      }
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  Problems p_;
  int fd_ = -1;
};

// The header of `source`, checked whole against its size.
struct ReadHeader {
  std::uint64_t dataStart = 0;
  Header header;
};

ReadHeader readHeaderOf(const Problems& p, const SafetensorsReader::Source& source) {
  const std::uint64_t fileBytes = source.size;
  if (fileBytes < kLengthBytes) {
    p.fail("", fmt::format("file is {} bytes; a safetensors file starts with an 8-byte header length", fileBytes));
  }
  std::array<std::byte, kLengthBytes> raw{};
  source.readAt(0, std::span<std::byte>(raw));
  std::uint64_t headerBytes = 0;
  std::memcpy(&headerBytes, raw.data(), kLengthBytes);
  if (headerBytes > kMaxSafetensorsHeaderBytes) {
    p.fail("", fmt::format("header length {} exceeds the limit of {} bytes", headerBytes, kMaxSafetensorsHeaderBytes));
  }
  if (headerBytes > fileBytes - kLengthBytes) {
    p.fail("", fmt::format("header length {} runs past the end of the file ({} bytes)", headerBytes, fileBytes));
  }
  auto text = allocateBytes(p, headerBytes, "the header");
  source.readAt(kLengthBytes, std::span<std::byte>(text));
  const std::uint64_t dataStart = kLengthBytes + headerBytes;
  try {
    return {dataStart, readHeader(p, std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                                  fileBytes - dataStart)};
  } catch (const std::bad_alloc&) {
    throw DeviceError(fmt::format("out of memory parsing the {}-byte header (in {})", headerBytes, p.origin()));
  }
}

}  // namespace

std::int64_t SafetensorsTensor::numel() const {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (const auto d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      throw UserError("shape", fmt::format("shape {} has no valid element count", shapeString(shape)));
    }
  }
  return n;
}

std::vector<float> SafetensorsTensor::floats() const { return decodeElements(bytes, dtype); }

const SafetensorsTensor& SafetensorsFile::tensor(std::string_view name, std::string_view field) const {
  return findTensor(tensors, name, field, origin);
}

std::vector<float> SafetensorsFile::floats(std::string_view name) const { return tensor(name).floats(); }

SafetensorsReader SafetensorsReader::withSource(std::shared_ptr<const Source> source, std::string origin) {
  SafetensorsReader r;
  r.origin_ = std::move(origin);
  r.source_ = std::move(source);
  auto [dataStart, header] = readHeaderOf(Problems(r.origin_), *r.source_);
  r.dataStart_ = dataStart;
  r.metadata_ = std::move(header.metadata);
  for (auto& e : header.entries) r.entries_.emplace(e.name, SafetensorsEntry{e.dtype, std::move(e.shape), e.begin, e.end});
  return r;
}

SafetensorsReader SafetensorsReader::open(const std::filesystem::path& path) {
  return withSource(std::make_shared<const FileSource>(Problems(path.string())), path.string());
}

SafetensorsReader SafetensorsReader::fromMemory(std::span<const std::byte> file, std::string origin) {
  return withSource(std::make_shared<const MemorySource>(file), std::move(origin));
}

const SafetensorsEntry& SafetensorsReader::entry(std::string_view name, std::string_view field) const {
  return findTensor(entries_, name, field, origin_);
}

SafetensorsTensor SafetensorsReader::read(std::string_view name, std::string_view field) const {
  const SafetensorsEntry& e = entry(name, field);
  const Problems p(origin_);
  SafetensorsTensor t;
  t.dtype = e.dtype;
  t.shape = e.shape;
  t.bytes = allocateBytes(p, e.end - e.begin, fmt::format("tensor {}", quoteForMessage(name)));
  if (!t.bytes.empty()) source_->readAt(dataStart_ + e.begin, std::span<std::byte>(t.bytes));
  return t;
}

SafetensorsFile SafetensorsReader::readAll() const {
  SafetensorsFile out;
  out.origin = origin_;
  out.metadata = metadata_;
  for (const auto& [name, e] : entries_) out.tensors.emplace(name, read(name));
  return out;
}

SafetensorsFile parseSafetensors(std::span<const std::byte> file, const std::string& origin) {
  return SafetensorsReader::fromMemory(file, origin).readAll();
}

SafetensorsFile readSafetensors(const std::filesystem::path& path) { return SafetensorsReader::open(path).readAll(); }

std::vector<std::byte> encodeSafetensors(std::span<const NamedTensor> tensors, DType dtype,
                                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string_view> seen;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == kMetadataKey) {
      throw UserError("name", fmt::format("tensor name {} is reserved or empty", quoteForMessage(t.name)));
    }
    if (!seen.insert(t.name).second) {
      throw UserError(t.name, fmt::format("tensor name {} appears twice", quoteForMessage(t.name)));
    }
    std::uint64_t numel = 1;
    for (const auto d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel)) {
        throw UserError(t.name, fmt::format("tensor {}: bad shape {}", quoteForMessage(t.name), shapeString(t.shape)));
      }
    }
    if (numel != t.values.size()) {
      throw UserError(t.name, fmt::format("tensor {}: shape {} has {} elements but {} values were given",
                                          quoteForMessage(t.name), shapeString(t.shape), numel, t.values.size()));
    }
    const std::uint64_t bytes = numel * dtypeBytes(dtype);
    header[t.name] = {{"dtype", std::string(safetensorsDTypeName(dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {
    throw UserError("name", "tensor names and metadata must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the format's writers align the data to 8 bytes

  // One allocation, filled in place: length, header, then each tensor's elements.
  const std::uint64_t n = text.size();
  std::vector<std::byte> out(kLengthBytes + text.size() + offset);
  std::memcpy(out.data(), &n, kLengthBytes);
  std::memcpy(out.data() + kLengthBytes, text.data(), text.size());
  std::size_t at = kLengthBytes + text.size();
  for (const auto& t : tensors) {
    const auto bytes = encodeElements(t.values, dtype);
    if (!bytes.empty()) std::memcpy(out.data() + at, bytes.data(), bytes.size());
    at += bytes.size();
  }
  return out;
}

void writeSafetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors, DType dtype,
                      const std::map<std::string, std::string>& metadata) {
  writeFileAtomically(path, encodeSafetensors(tensors, dtype, metadata));
}

}  // namespace foundry
