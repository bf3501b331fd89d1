// safetensors: round trips in every dtype, files built byte by byte from the format's description,
// and a table of malformed files each rejected with a message that says what is wrong.
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/runner/io/Safetensors.h"
#include "support/TempDir.h"

namespace foundry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::filesystem::path kCorpus = std::filesystem::path(FOUNDRY_SOURCE_DIR) / "tests/fuzz/corpus/safetensors";

using Bytes = std::vector<std::byte>;

void append(Bytes& out, std::string_view text) {
  for (const char c : text) out.push_back(static_cast<std::byte>(c));
}
void appendU64(Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}
Bytes hex(std::initializer_list<unsigned> bytes) {
  Bytes out;
  for (const unsigned b : bytes) out.push_back(static_cast<std::byte>(b));
  return out;
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
/// A file: the header's length, the header, the data; no padding unless the header has it.
Bytes file(std::string_view header, const Bytes& data = {}) {
  Bytes out;
  appendU64(out, header.size());
  append(out, header);
  return cat(out, data);
}
Bytes zeros(std::size_t n) { return Bytes(n, std::byte{0}); }

// ---------------------------------------------------------------------------------------------
// Round trips.

class SafetensorsRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(SafetensorsRoundTrip, PreservesValuesToTheDTypesPrecision) {
  const DType dtype = GetParam();
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> big(3 * 5 * 7);
  for (auto& v : big) v = normal(gen);
  big[0] = 0.0f;
  big[1] = -0.0f;
  big[2] = 1e-3f;
  big[3] = 1000.0f;
  const std::vector<NamedTensor> tensors = {
      {"layers.0.attn.q", {3, 5, 7}, big},
      {"scalar", {}, {0.25f}},
      {"empty", {0, 4}, {}},
      {"row", {4}, {1.0f, -2.0f, 0.5f, 3.0f}},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "round trip"}};
  test::TempDir dir;
  const auto path = dir.path() / "t.safetensors";
  writeSafetensors(path, tensors, dtype, metadata);
  const SafetensorsFile f = readSafetensors(path);
  EXPECT_EQ(f.metadata, metadata);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  // F32 is exact; F16 keeps 11 significant bits, BF16 8 (round to nearest: half an ulp).
  const double relative = dtype == DType::F32 ? 0.0 : dtype == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  for (const auto& t : tensors) {
    SCOPED_TRACE(t.name);
    const SafetensorsTensor& got = f.tensor(t.name);
    EXPECT_EQ(got.dtype, dtype);
    EXPECT_EQ(got.shape, t.shape);
    EXPECT_EQ(got.numel(), static_cast<std::int64_t>(t.values.size()));
    EXPECT_EQ(got.bytes.size(), t.values.size() * dtypeBytes(dtype));
    const std::vector<float> values = f.floats(t.name);
    ASSERT_EQ(values.size(), t.values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(values[i], t.values[i], std::abs(t.values[i]) * relative + 1e-7) << i;
      EXPECT_EQ(std::signbit(values[i]), std::signbit(t.values[i])) << i;
    }
  }
  // The same bytes in memory and on disk.
  EXPECT_EQ(parseSafetensors(encodeSafetensors(tensors, dtype, metadata), "memory").tensor("row").bytes,
            f.tensor("row").bytes);
}

INSTANTIATE_TEST_SUITE_P(DTypes, SafetensorsRoundTrip, ::testing::Values(DType::F16, DType::F32, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return std::string(dtypeName(p.param));
                         });

// ---------------------------------------------------------------------------------------------
// Compatibility with the format as specified, not only with ourselves.

TEST(Safetensors, ReadsAFileWrittenByHand) {
  // Tensors out of name order in the data, the header padded with spaces as the format's writers do.
  const std::string header =
      R"({"b":{"dtype":"F16","shape":[1,2],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("c":{"dtype":"BF16","shape":[],"data_offsets":[12,14]},)"
      R"("__metadata__":{"format":"pt"}}      )";
  const Bytes data = hex({0x00, 0x00, 0x80, 0x3f,   // a[0] = 1.0f
                          0x00, 0x00, 0x20, 0xc0,   // a[1] = -2.5f
                          0x00, 0x38, 0x00, 0xbc,   // b = {0.5, -1.0} as f16
                          0x40, 0x40});             // c = 3.0 as bf16
  const SafetensorsFile f = parseSafetensors(file(header, data), "by-hand");
  EXPECT_THAT(f.floats("a"), ElementsAre(1.0f, -2.5f));
  EXPECT_THAT(f.floats("b"), ElementsAre(0.5f, -1.0f));
  EXPECT_THAT(f.floats("c"), ElementsAre(3.0f));
  EXPECT_EQ(f.tensor("b").shape, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(f.tensor("c").dtype, DType::BF16);
  EXPECT_TRUE(f.tensor("c").shape.empty());
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

TEST(Safetensors, WritesTheSpecifiedBytes) {
  const std::vector<NamedTensor> tensors = {{"x", {2}, {1.0f, -2.5f}}, {"s", {}, {0.5f}}};
  const Bytes got = encodeSafetensors(tensors, DType::F32, {{"k", "v"}});
  // Keys sorted in the header, data in the order given, header padded with spaces to 8 bytes.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"s":{"data_offsets":[8,12],"dtype":"F32","shape":[]},)"
      R"("x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  const Bytes expected =
      file(padded, hex({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, 0x00, 0x00, 0x00, 0x3f}));
  EXPECT_EQ(got, expected);
  EXPECT_EQ((got.size() - 12) % 8, 0u) << "data starts on an 8-byte boundary";
}

TEST(Safetensors, ReadsTheCorpusFileWrittenByTheIndependentScript) {
  const SafetensorsFile f = readSafetensors(kCorpus / "valid-mixed-dtypes.safetensors");
  EXPECT_THAT(f.floats("w"), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(f.tensor("w").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_THAT(f.floats("h"), ElementsAre(0.5f, -1.0f, 65504.0f));
  EXPECT_EQ(f.tensor("h").dtype, DType::F16);
  EXPECT_THAT(f.floats("b"), ElementsAre(3.0f, -0.125f));
  EXPECT_EQ(f.tensor("b").dtype, DType::BF16);
  EXPECT_EQ(f.metadata.at("producer"), "make_safetensors_corpus.py");
}

TEST(Safetensors, FuzzCorpusSeedsBehaveAsNamed) {
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(kCorpus)) {
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    ++seen;
    if (name.starts_with("valid-")) {
      EXPECT_NO_THROW(readSafetensors(e.path()));
    } else {
      ASSERT_TRUE(name.starts_with("invalid-"));
      EXPECT_THROW(readSafetensors(e.path()), Error);
    }
  }
  EXPECT_GE(seen, 10);
}

TEST(Safetensors, EdgeCasesTheFormatAllows) {
  EXPECT_TRUE(parseSafetensors(file("{}"), "empty").tensors.empty());
  EXPECT_TRUE(parseSafetensors(file("{}       "), "padded").tensors.empty());
  const SafetensorsFile f = parseSafetensors(
      file(R"({"z":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"s":{"dtype":"F16","shape":[],"data_offsets":[0,2]}})",
           hex({0x00, 0x3c})),
      "edge");
  EXPECT_EQ(f.tensor("z").numel(), 0);
  EXPECT_TRUE(f.floats("z").empty());
  EXPECT_THAT(f.floats("s"), ElementsAre(1.0f));
}

TEST(Safetensors, MissingTensorNamesTheOnesPresent) {
  const SafetensorsFile f = parseSafetensors(encodeSafetensors(std::vector<NamedTensor>{{"a", {1}, {1.0f}}}, DType::F32),
                                             "m");
  try {
    f.tensor("b");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no tensor \"b\"; the file holds: \"a\""));
  }
}

TEST(Safetensors, FileErrorsNameThePath) {
  test::TempDir dir;
  const auto missing = dir.path() / "missing.safetensors";
  try {
    readSafetensors(missing);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing.string()));
    EXPECT_THAT(e.what(), HasSubstr("cannot read"));
  }
  EXPECT_THROW(readSafetensors(dir.path()), UserError);
  const auto shortFile = dir.write("short.safetensors", "abc");
  try {
    readSafetensors(shortFile);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("file is 3 bytes"));
    EXPECT_THAT(e.what(), HasSubstr(shortFile.string()));
  }
}

TEST(Safetensors, WriterRejectsBadInput) {
  const auto rejects = [](std::vector<NamedTensor> tensors, const std::string& fragment) {
    try {
      encodeSafetensors(tensors, DType::F16);
      ADD_FAILURE() << "accepted; expected " << fragment;
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  rejects({{"a", {2}, {1, 2}}, {"a", {1}, {3}}}, "appears twice");
  rejects({{"__metadata__", {1}, {1}}}, "reserved or empty");
  rejects({{"", {1}, {1}}}, "reserved or empty");
  rejects({{"a", {2, 2}, {1, 2, 3}}}, "shape [2, 2] has 4 elements but 3 values were given");
  rejects({{"a", {-1}, {}}}, "bad shape [-1]");
  rejects({{"a\xff", {1}, {1}}}, "valid UTF-8");
  // Nothing is left behind when writing fails.
  test::TempDir dir;
  EXPECT_THROW(writeSafetensors(dir.path() / "x.safetensors", std::vector<NamedTensor>{{"a", {2}, {1}}}, DType::F32),
               UserError);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// ---------------------------------------------------------------------------------------------
// Malformed files.

struct BadFile {
  std::string name;
  std::function<Bytes()> bytes;
  ErrorKind kind;
  std::string pointer;  // UserError::field(); for UnsupportedError, the message's prefix
  std::string fragment;
};

std::ostream& operator<<(std::ostream& os, const BadFile& b) { return os << b.name; }

std::function<Bytes()> bytes(Bytes b) {
  return [=] { return b; };
}
std::function<Bytes()> withHeader(std::string header, Bytes data = zeros(8)) {
  return [=] { return file(header, data); };
}
// One F32 tensor "a" with the given fields (JSON fragments), over `data`.
std::function<Bytes()> entry(std::string dtype, std::string shape, std::string offsets, Bytes data = zeros(8)) {
  return withHeader(R"({"a":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}",
                    data);
}
std::function<Bytes()> lengthThen(std::uint64_t length, std::size_t rest) {
  return [=] {
    Bytes out;
    appendU64(out, length);
    return cat(out, zeros(rest));
  };
}

const BadFile kBadFiles[] = {
    // The 8-byte length and the header's bounds.
    {"Empty", bytes({}), ErrorKind::User, "", "file is 0 bytes; a safetensors file starts with an 8-byte header length"},
    {"ShorterThanTheLength", bytes(zeros(5)), ErrorKind::User, "", "file is 5 bytes"},
    {"HeaderPastEndOfFile", lengthThen(1000, 12), ErrorKind::User, "",
     "header length 1000 runs past the end of the file (20 bytes)"},
    {"HeaderOneBytePastEnd", lengthThen(13, 12), ErrorKind::User, "", "header length 13 runs past the end"},
    {"HeaderOverTheLimit", lengthThen(100'000'001, 16), ErrorKind::User, "",
     "header length 100000001 exceeds the limit of 100000000 bytes"},
    {"HeaderLengthAllOnes", lengthThen(std::numeric_limits<std::uint64_t>::max(), 16), ErrorKind::User, "",
     "header length 18446744073709551615 exceeds the limit"},
    // The header's JSON.
    {"EmptyHeader", withHeader(""), ErrorKind::User, "", "header does not start with '{'"},
    {"HeaderIsAnArray", withHeader("[1, 2]"), ErrorKind::User, "", "header does not start with '{'"},
    {"HeaderWithLeadingSpace", withHeader(" {}"), ErrorKind::User, "", "header does not start with '{'"},
    {"HeaderNotJson", withHeader("{not json}"), ErrorKind::User, "",
     "header is not valid JSON: malformed JSON at line 1, column 3"},
    {"HeaderPaddedWithNul", withHeader(std::string("{}\0\0", 4)), ErrorKind::User, "",
     "header is not valid JSON: malformed JSON at line 1, column 3: a NUL byte"},
    {"HeaderTruncated", withHeader(R"({"a":{"dtype":"F32")"), ErrorKind::User, "", "malformed JSON at line 1"},
    {"HeaderInvalidUtf8", withHeader("{\"\xc3\x28\":1}"), ErrorKind::User, "", "header is not valid JSON"},
    {"HeaderDeeplyNested", withHeader("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}"),
     ErrorKind::User, [] {
       std::string p = "/a";  // the object holding "a" is the first of the 32 levels
       for (int i = 0; i < 31; ++i) p += "/0";
       return p;
     }(), "nested deeper than 32"},
    {"DuplicateTensor",
     withHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
     ErrorKind::User, "/a", "duplicate key \"a\""},
    // Entries.
    {"EntryIsANumber", withHeader(R"({"a":3})"), ErrorKind::User, "/a",
     "tensor \"a\": expected an object with dtype, shape and data_offsets, found 3"},
    {"EntryMissingDType", withHeader(R"({"a":{"shape":[2],"data_offsets":[0,8]}})"), ErrorKind::User, "/a/dtype",
     "tensor \"a\": missing key \"dtype\""},
    {"EntryMissingShape", withHeader(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})"), ErrorKind::User, "/a/shape",
     "missing key \"shape\""},
    {"EntryMissingOffsets", withHeader(R"({"a":{"dtype":"F32","shape":[2]}})"), ErrorKind::User, "/a/data_offsets",
     "missing key \"data_offsets\""},
    {"EntryUnknownKey", withHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"offset":0}})"),
     ErrorKind::User, "/a/offset", "unknown key \"offset\"; accepted: dtype, shape, data_offsets"},
    {"TensorNameIsEscaped", withHeader(R"({"x/y":3})"), ErrorKind::User, "/x~1y", "tensor \"x/y\""},
    // dtype.
    {"DTypeIsANumber", entry("32", "[2]", "[0,8]"), ErrorKind::User, "/a/dtype", "expected a dtype string, found 32"},
    {"DTypeUnknown", entry(R"("F17")", "[2]", "[0,8]"), ErrorKind::User, "/a/dtype",
     "unknown dtype \"F17\"; supported: F16, F32, BF16"},
    {"DTypeLowerCase", entry(R"("f32")", "[2]", "[0,8]"), ErrorKind::User, "/a/dtype", "unknown dtype \"f32\""},
    {"DTypeF64IsUnsupported", entry(R"("F64")", "[1]", "[0,8]"), ErrorKind::Unsupported, "/a/dtype",
     "dtype F64 is not supported; supported: F16, F32, BF16"},
    {"DTypeI8IsUnsupported", entry(R"("I8")", "[8]", "[0,8]"), ErrorKind::Unsupported, "/a/dtype", "dtype I8"},
    // shape.
    {"ShapeIsAnObject", entry(R"("F32")", "{}", "[0,8]"), ErrorKind::User, "/a/shape",
     "expected an array of dimensions, found an object"},
    {"ShapeNegativeDim", entry(R"("F32")", "[1,-2]", "[0,8]"), ErrorKind::User, "/a/shape/1",
     "expected a dimension from 0 to 2^63-1, found -2"},
    {"ShapeFractionalDim", entry(R"("F32")", "[2.5]", "[0,8]"), ErrorKind::User, "/a/shape/0", "found 2.5"},
    {"ShapeDimIsAString", entry(R"("F32")", R"(["2"])", "[0,8]"), ErrorKind::User, "/a/shape/0", "(a string)"},
    {"ShapeDimBeyondInt64", entry(R"("F32")", "[9223372036854775808,0]", "[0,0]", {}), ErrorKind::User, "/a/shape/0",
     "found 9223372036854775808"},
    {"ShapeOverflows", entry(R"("F32")", "[4294967296,4294967296,2]", "[0,8]"), ErrorKind::User, "/a/shape",
     "shape [4294967296, 4294967296, 2] has more bytes than fit in 64 bits"},
    {"ShapeOverflowsOnlyInBytes", entry(R"("F32")", "[4611686018427387904]", "[0,8]"), ErrorKind::User, "/a/shape",
     "more bytes than fit in 64 bits"},
    // data_offsets.
    {"OffsetsNotAnArray", entry(R"("F32")", "[2]", "8"), ErrorKind::User, "/a/data_offsets",
     "expected data_offsets [begin, end] of non-negative integers, found 8"},
    {"OffsetsOneNumber", entry(R"("F32")", "[2]", "[8]"), ErrorKind::User, "/a/data_offsets", "found [8]"},
    {"OffsetsThreeNumbers", entry(R"("F32")", "[2]", "[0,4,8]"), ErrorKind::User, "/a/data_offsets",
     "found [0,4,8]"},
    {"OffsetsNegative", entry(R"("F32")", "[2]", "[-8,0]"), ErrorKind::User, "/a/data_offsets", "found [-8,0]"},
    {"OffsetsFractional", entry(R"("F32")", "[2]", "[0,8.0]"), ErrorKind::User, "/a/data_offsets", "found [0,8.0]"},
    {"BeginAfterEnd", entry(R"("F32")", "[2]", "[8,0]"), ErrorKind::User, "/a/data_offsets",
     "tensor \"a\": begin 8 is after end 0"},
    {"EndPastTheData", entry(R"("F32")", "[4]", "[0,16]"), ErrorKind::User, "/a/data_offsets",
     "offsets [0, 16) run past the end of the data (8 bytes)"},
    {"EndIsHuge", entry(R"("F32")", "[2]", "[0,18446744073709551615]"), ErrorKind::User, "/a/data_offsets",
     "run past the end of the data"},
    {"ByteCountIsNotTheShapes", entry(R"("F32")", "[3]", "[0,8]"), ErrorKind::User, "/a/data_offsets",
     "tensor \"a\": holds 8 bytes but shape [3] of F32 needs 12"},
    {"ByteCountIsNotTheDTypes", entry(R"("F16")", "[2]", "[0,8]"), ErrorKind::User, "/a/data_offsets",
     "holds 8 bytes but shape [2] of F16 needs 4"},
    {"TruncatedData", entry(R"("F32")", "[2]", "[0,8]", zeros(7)), ErrorKind::User, "/a/data_offsets",
     "run past the end of the data (7 bytes)"},
    // How the tensors cover the data.
    {"OverlappingTensors",
     withHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                zeros(12)),
     ErrorKind::User, "/b/data_offsets", "tensor \"b\" [4, 12) overlaps tensor \"a\" [0, 8)"},
    {"SameBytesTwice",
     withHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"),
     ErrorKind::User, "/b/data_offsets", "overlaps tensor \"a\""},
    {"EmptyTensorInsideAnother",
     withHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})"),
     ErrorKind::User, "/e/data_offsets", "overlaps tensor \"a\""},
    {"HoleBetweenTensors",
     withHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                zeros(12)),
     ErrorKind::User, "", "bytes [4, 8) of the data belong to no tensor"},
    {"TrailingBytes", entry(R"("F32")", "[1]", "[0,4]"), ErrorKind::User, "",
     "bytes [4, 8) at the end of the data belong to no tensor"},
    {"DataWithoutTensors", withHeader("{}", zeros(3)), ErrorKind::User, "", "bytes [0, 3) at the end of the data"},
    // __metadata__.
    {"MetadataIsANumber", withHeader(R"({"__metadata__":3})", {}), ErrorKind::User, "/__metadata__",
     "__metadata__: expected an object of strings, found 3"},
    {"MetadataValueIsANumber", withHeader(R"({"__metadata__":{"step":1}})", {}), ErrorKind::User,
     "/__metadata__/step", "__metadata__: expected a string, found 1"},
};

class MalformedSafetensors : public ::testing::TestWithParam<BadFile> {};

TEST_P(MalformedSafetensors, IsRejectedWithAReason) {
  const BadFile& row = GetParam();
  const Bytes input = row.bytes();
  for (const bool fromDisk : {false, true}) {
    SCOPED_TRACE(fromDisk ? "readSafetensors" : "parseSafetensors");
    test::TempDir dir;
    const auto path = dir.path() / "bad.safetensors";
    std::string origin = "bad.safetensors";
    if (fromDisk) {
      writeFileAtomically(path, input);
      origin = path.string();
    }
    try {
      fromDisk ? readSafetensors(path) : parseSafetensors(input, origin);
      FAIL() << "accepted";
    } catch (const UserError& e) {
      ASSERT_EQ(row.kind, ErrorKind::User) << e.what();
      EXPECT_EQ(e.field(), row.pointer) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(row.fragment));
      EXPECT_THAT(e.what(), HasSubstr("(in " + origin + ")"));
    } catch (const UnsupportedError& e) {
      ASSERT_EQ(row.kind, ErrorKind::Unsupported) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(row.pointer + ": "));
      EXPECT_THAT(e.what(), HasSubstr(row.fragment));
      EXPECT_THAT(e.what(), HasSubstr("(in " + origin + ")"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, MalformedSafetensors, ::testing::ValuesIn(kBadFiles),
                         [](const ::testing::TestParamInfo<BadFile>& p) { return p.param.name; });

// Random damage to a valid file, the length field included: a foundry error or a file, never a crash.
TEST(Safetensors, DamagedBytesOnlyEverFailWithFoundryErrors) {
  const std::vector<NamedTensor> tensors = {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {4}, {1, 2, 3, 4}}, {"c", {}, {9}}};
  const Bytes good = encodeSafetensors(tensors, DType::F16, {{"k", "v"}});
  std::mt19937 gen(99);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    Bytes b = good;
    const int edits = 1 + static_cast<int>(gen() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = gen() % b.size();
      switch (gen() % 4) {
        case 0: b[at] = static_cast<std::byte>(gen() % 256); break;
        case 1: b.erase(b.begin() + static_cast<std::ptrdiff_t>(at)); break;
        case 2: b[gen() % 8] = static_cast<std::byte>(gen() % 256); break;  // the length
        default: b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::byte>("{}[]\",:0-9"[gen() % 11])); break;
      }
      if (b.empty()) b.push_back(std::byte{0});
    }
    try {
      const SafetensorsFile f = parseSafetensors(b, "damaged");
      for (const auto& [name, t] : f.tensors) EXPECT_EQ(t.floats().size(), static_cast<std::size_t>(t.numel()));
    } catch (const UserError&) {
      ++rejected;
    } catch (const UnsupportedError&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "non-foundry exception: " << e.what();
    }
  }
  EXPECT_GT(rejected, 2000);
}

}  // namespace
}  // namespace foundry
