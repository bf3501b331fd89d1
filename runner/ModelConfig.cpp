#include "runner/ModelConfig.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/RuntimeOptions.h"
#include "foundry/io/Json.h"
#include "steps/FlashAttentionStep.h"  // kFlashHeadDims only: header constants, no link dependency

namespace foundry {

namespace {

using json = nlohmann::json;

struct Key {
  std::string_view name;
  bool required;
};

// The keys each object accepts; configs/schema.json documents the same (a test keeps them equal).
constexpr Key kTopKeys[] = {{"$schema", false}, {"name", true},  {"source", true}, {"note", false},
                            {"attention", true}, {"run", true},  {"tuning", false}};
constexpr Key kAttentionKeys[] = {{"layers", true},   {"n_heads", true},     {"n_kv_heads", true},
                                  {"head_dim", true}, {"max_context", true}, {"rope", true}};
constexpr Key kRopeKeys[] = {{"theta", true}, {"pairing", true}, {"rotary_dims", false}, {"scaling", false}};
constexpr Key kScalingKeys[] = {{"type", true},
                                {"factor", true},
                                {"low_freq_factor", true},
                                {"high_freq_factor", true},
                                {"original_max_position", true}};
constexpr Key kRunKeys[] = {{"batch", true}, {"prompt_len", true}, {"decode_tokens", true}, {"layers", false},
                            {"dtype", true}, {"seed", false},      {"check", false}};

// Rope scaling types Hugging Face configs use; only llama3 is implemented.
constexpr std::string_view kKnownRopeScalings[] = {"linear", "dynamic", "yarn", "longrope", "llama3"};

constexpr std::size_t kMaxNameChars = 256;
constexpr std::size_t kMaxNoteChars = 4096;
constexpr double kMaxTheta = 1e12;
constexpr double kMaxScalingFactor = 1024.0;

// The name an error uses for each field a command-line flag can override.
struct FieldNames {
  std::string batch = "/run/batch";
  std::string promptLen = "/run/prompt_len";
  std::string decodeTokens = "/run/decode_tokens";
  std::string layers = "/run/layers";
  std::string dtype = "/run/dtype";
};

// Reads typed values out of a parsed document; every failure names the JSON pointer and the origin.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw UserError(field, withOrigin(message));
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& message) const {
    throw UnsupportedError(withOrigin(fmt::format("{}: {}", field, message)));
  }

  /// `value` must be an object holding only `keys` and all the required ones.
  void object(const json& value, const std::string& pointer, std::span<const Key> keys) const {
    if (!value.is_object()) fail(pointer, fmt::format("expected an object, found {}", describeJsonValue(value)));
    const auto known = [&](std::string_view name) {
      return std::any_of(keys.begin(), keys.end(), [&](const Key& k) { return k.name == name; });
    };
    for (const auto& item : value.items()) {
      if (!known(item.key())) {
        fail(jsonPointerAppend(pointer, item.key()),
             fmt::format("unknown key {}; accepted: {}", quoteForMessage(item.key()), names(keys, false)));
      }
    }
    for (const auto& k : keys) {
      if (k.required && !value.contains(k.name)) {
        fail(jsonPointerAppend(pointer, k.name),
             fmt::format("missing required key \"{}\"; required here: {}", k.name, names(keys, true)));
      }
    }
  }

  std::uint32_t integer(const json& v, const std::string& field, std::uint32_t lo, std::uint32_t hi) const {
    return checkedInteger(v, field, lo, hi);
  }

  std::uint64_t seed(const json& v, const std::string& field) const {
    if (!v.is_number_unsigned()) {
      fail(field, fmt::format("expected an integer from 0 to {}, found {}", std::numeric_limits<std::uint64_t>::max(),
                              describeJsonValue(v)));
    }
    return v.get<std::uint64_t>();
  }

  /// A number in (lo, hi] when `loExclusive`, else [lo, hi].
  double number(const json& v, const std::string& field, double lo, bool loExclusive, double hi) const {
    const auto expected = [&] {
      return fmt::format("expected a number {} {} and at most {}", loExclusive ? "greater than" : "of at least", lo,
                         hi);
    };
    if (!v.is_number()) fail(field, fmt::format("{}, found {}", expected(), describeJsonValue(v)));
    const double x = v.get<double>();
    if (!(loExclusive ? x > lo : x >= lo) || !(x <= hi)) {
      fail(field, fmt::format("{}, found {}", expected(), describeJsonValue(v)));
    }
    return x;
  }

  std::string string(const json& v, const std::string& field, std::size_t maxChars, bool allowEmpty) const {
    if (!v.is_string()) fail(field, fmt::format("expected a string, found {}", describeJsonValue(v)));
    const auto& s = v.get_ref<const std::string&>();
    if (!allowEmpty && s.empty()) fail(field, "expected a non-empty string, found \"\"");
    if (s.size() > maxChars) {
      fail(field, fmt::format("expected at most {} characters, found {}", maxChars, s.size()));
    }
    return s;
  }

  bool boolean(const json& v, const std::string& field) const {
    if (!v.is_boolean()) fail(field, fmt::format("expected true or false, found {}", describeJsonValue(v)));
    return v.get<bool>();
  }

  DType runDType(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, fmt::format("expected \"f16\" or \"f32\", found {}", describeJsonValue(v)));
    return runDTypeNamed(v.get_ref<const std::string&>(), field);
  }

  DType runDTypeNamed(const std::string& name, const std::string& field) const {
    if (name == "f16") return DType::F16;
    if (name == "f32") return DType::F32;
    if (name == "bf16") unsupported(field, "bf16 runs are not supported yet; use \"f16\" or \"f32\"");
    fail(field, fmt::format("expected \"f16\" or \"f32\", found {}", quoteForMessage(name)));
  }

  /// Checks a `tuning` object by applying it to default options; errors carry "/tuning/<key>".
  void tuning(const json& v, const std::string& pointer) const {
    if (!v.is_object()) fail(pointer, fmt::format("expected an object of knob values, found {}", describeJsonValue(v)));
    for (const auto& item : v.items()) {
      // applyTuning joins pointer and key unescaped; no knob has '/' or '~', so name such keys here.
      if (item.key().find_first_of("/~") != std::string::npos) {
        fail(jsonPointerAppend(pointer, item.key()),
             fmt::format("unknown tuning key {}; knob names hold only letters, digits and '_'",
                         quoteForMessage(item.key())));
      }
    }
    RuntimeOptions scratch;
    try {
      scratch.applyTuning(v, pointer);
    } catch (const UserError& e) {
      const std::string what = e.what();
      const std::string prefix = e.field() + ": ";
      fail(e.field(), what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
    } catch (const json::exception& e) {
      fail(pointer, fmt::format("invalid tuning value: {}", e.what()));
    }
  }

 private:
  std::string withOrigin(const std::string& message) const {
    return origin_.empty() ? message : fmt::format("{} (in {})", message, origin_);
  }

  static std::string names(std::span<const Key> keys, bool requiredOnly) {
    std::string out;
    for (const auto& k : keys) {
      if (requiredOnly && !k.required) continue;
      out += fmt::format("{}{}", out.empty() ? "" : ", ", k.name);
    }
    return out;
  }

  std::uint32_t checkedInteger(const json& v, const std::string& field, std::uint32_t lo, std::uint32_t hi) const {
    const auto bad = [&] {
      fail(field, fmt::format("expected an integer from {} to {}, found {}", lo, hi, describeJsonValue(v)));
    };
    if (!v.is_number_integer()) bad();  // true for signed and unsigned JSON integers, false for 1.0
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u < lo || u > hi) bad();
      return static_cast<std::uint32_t>(u);
    }
    const auto i = v.get<std::int64_t>();
    if (i < static_cast<std::int64_t>(lo) || i > static_cast<std::int64_t>(hi)) bad();
    return static_cast<std::uint32_t>(i);
  }

  std::string origin_;
};

void checkHeadDim(const Reader& r, std::uint32_t headDim) {
  if (std::find(std::begin(kFlashHeadDims), std::end(kFlashHeadDims), headDim) == std::end(kFlashHeadDims)) {
    r.unsupported("/attention/head_dim",
                  fmt::format("head_dim {} is not supported by the fused attention kernels; supported: {}", headDim,
                              fmt::join(kFlashHeadDims, ", ")));
  }
}

// The rules that tie fields together; run after parsing and again after command-line overrides.
void checkRelations(const Reader& r, const ModelConfig& c, const FieldNames& names, bool promptOverridden,
                    bool decodeOverridden) {
  if (c.nKvHeads == 0 || c.nKvHeads > c.nHeads || c.nHeads % c.nKvHeads != 0) {
    r.fail("/attention/n_kv_heads",
           fmt::format("n_heads ({}) must be a multiple of n_kv_heads ({}): each KV head serves a whole group of "
                       "query heads",
                       c.nHeads, c.nKvHeads));
  }
  if (c.rope.rotaryDims > c.headDim) {
    r.fail("/attention/rope/rotary_dims",
           fmt::format("rotary_dims ({}) cannot exceed head_dim ({})", c.rope.rotaryDims, c.headDim));
  }
  if (c.rope.llama3) {
    const auto& s = *c.rope.llama3;
    if (!(s.highFreqFactor > s.lowFreqFactor)) {
      r.fail("/attention/rope/scaling/high_freq_factor",
             fmt::format("high_freq_factor ({}) must be greater than low_freq_factor ({})", s.highFreqFactor,
                         s.lowFreqFactor));
    }
    if (s.originalMaxPosition > c.maxContext) {
      r.fail("/attention/rope/scaling/original_max_position",
             fmt::format("original_max_position ({}) cannot exceed max_context ({})", s.originalMaxPosition,
                         c.maxContext));
    }
  }
  if (c.run.layers > c.layers) {
    r.fail(names.layers, fmt::format("cannot run {} layers of {}, which has {}", c.run.layers, c.name, c.layers));
  }
  if (c.run.promptLen > c.maxContext) {
    r.fail(names.promptLen,
           fmt::format("prompt_len ({}) exceeds max_context ({}) of {}", c.run.promptLen, c.maxContext, c.name));
  }
  if (c.totalTokens() > c.maxContext) {
    // Blame the field the user changed, if only one of them was.
    const std::string& field = promptOverridden && !decodeOverridden ? names.promptLen : names.decodeTokens;
    r.fail(field, fmt::format("prompt_len + decode_tokens = {} + {} = {} exceeds max_context ({}) of {}",
                              c.run.promptLen, c.run.decodeTokens, c.totalTokens(), c.maxContext, c.name));
  }
  checkHeadDim(r, c.headDim);
}

RopeSpec readRope(const Reader& r, const json& rope) {
  r.object(rope, "/attention/rope", kRopeKeys);
  RopeSpec spec;
  spec.theta = r.number(rope.at("theta"), "/attention/rope/theta", 1.0, true, kMaxTheta);
  const json& pairing = rope.at("pairing");
  if (pairing == "rotate_half") spec.pairing = RopePairing::RotateHalf;
  else if (pairing == "interleaved") spec.pairing = RopePairing::Interleaved;
  else {
    r.fail("/attention/rope/pairing",
           fmt::format("expected \"rotate_half\" or \"interleaved\", found {}", describeJsonValue(pairing)));
  }
  if (rope.contains("rotary_dims")) {
    spec.rotaryDims = r.integer(rope.at("rotary_dims"), "/attention/rope/rotary_dims", 2, kMaxHeadDim);
    if (spec.rotaryDims % 2 != 0) {
      r.fail("/attention/rope/rotary_dims",
             fmt::format("expected an even number (dimensions rotate in pairs), found {}", spec.rotaryDims));
    }
  }
  if (rope.contains("scaling")) {
    const json& s = rope.at("scaling");
    const std::string p = "/attention/rope/scaling";
    r.object(s, p, kScalingKeys);
    const std::string type = r.string(s.at("type"), p + "/type", kMaxNameChars, false);
    if (type != "llama3") {
      const bool known = std::find(std::begin(kKnownRopeScalings), std::end(kKnownRopeScalings), type) !=
                         std::end(kKnownRopeScalings);
      if (known) r.unsupported(p + "/type", fmt::format("rope scaling \"{}\" is not supported; supported: llama3", type));
      r.fail(p + "/type", fmt::format("expected \"llama3\", found {}", quoteForMessage(type)));
    }
    Llama3Scaling l;
    l.factor = r.number(s.at("factor"), p + "/factor", 1.0, false, kMaxScalingFactor);
    l.lowFreqFactor = r.number(s.at("low_freq_factor"), p + "/low_freq_factor", 0.0, true, kMaxScalingFactor);
    l.highFreqFactor = r.number(s.at("high_freq_factor"), p + "/high_freq_factor", 0.0, true, kMaxScalingFactor);
    l.originalMaxPosition = r.integer(s.at("original_max_position"), p + "/original_max_position", 1, kMaxContext);
    spec.llama3 = l;
  }
  return spec;
}

ModelConfig readConfig(const Reader& r, const json& doc) {
  r.object(doc, "", kTopKeys);
  ModelConfig c;
  if (doc.contains("$schema")) r.string(doc.at("$schema"), "/$schema", kMaxNoteChars, false);
  c.name = r.string(doc.at("name"), "/name", kMaxNameChars, false);
  c.source = r.string(doc.at("source"), "/source", kMaxNameChars, false);
  if (doc.contains("note")) c.note = r.string(doc.at("note"), "/note", kMaxNoteChars, true);

  const json& a = doc.at("attention");
  r.object(a, "/attention", kAttentionKeys);
  c.layers = r.integer(a.at("layers"), "/attention/layers", 1, kMaxLayers);
  c.nHeads = r.integer(a.at("n_heads"), "/attention/n_heads", 1, kMaxHeads);
  c.nKvHeads = r.integer(a.at("n_kv_heads"), "/attention/n_kv_heads", 1, kMaxHeads);
  c.headDim = r.integer(a.at("head_dim"), "/attention/head_dim", 1, kMaxHeadDim);
  c.maxContext = r.integer(a.at("max_context"), "/attention/max_context", 1, kMaxContext);
  c.rope = readRope(r, a.at("rope"));

  const json& run = doc.at("run");
  r.object(run, "/run", kRunKeys);
  c.run.batch = r.integer(run.at("batch"), "/run/batch", 1, kMaxBatch);
  c.run.promptLen = r.integer(run.at("prompt_len"), "/run/prompt_len", 1, kMaxContext);
  c.run.decodeTokens = r.integer(run.at("decode_tokens"), "/run/decode_tokens", 0, kMaxContext);
  c.run.layers = run.contains("layers") ? r.integer(run.at("layers"), "/run/layers", 1, kMaxLayers) : c.layers;
  c.run.dtype = r.runDType(run.at("dtype"), "/run/dtype");
  if (run.contains("seed")) c.run.seed = r.seed(run.at("seed"), "/run/seed");
  if (run.contains("check")) c.run.check = r.boolean(run.at("check"), "/run/check");

  if (doc.contains("tuning")) {
    r.tuning(doc.at("tuning"), "/tuning");
    c.tuning = doc.at("tuning");
  }
  checkRelations(r, c, FieldNames{}, false, false);
  return c;
}

std::uint32_t overrideValue(const Reader& r, std::int64_t value, const std::string& flag, std::uint32_t lo,
                            std::uint32_t hi) {
  if (value < static_cast<std::int64_t>(lo) || value > static_cast<std::int64_t>(hi)) {
    r.fail(flag, fmt::format("expected an integer from {} to {}, found {}", lo, hi, value));
  }
  return static_cast<std::uint32_t>(value);
}

}  // namespace

ModelConfig parseModelConfig(std::string_view text, const std::string& origin) {
  const Reader r(origin);
  if (text.size() > kMaxConfigBytes) {
    r.fail("", fmt::format("config is {} bytes; the limit is {} bytes", text.size(), kMaxConfigBytes));
  }
  const json doc = parseJsonStrict(text, origin);
  try {
    return readConfig(r, doc);
  } catch (const json::exception& e) {
    // Every access above is checked first; reaching this is a bug, but still not a crash.
    throw InternalError(fmt::format("reading {}: {}", origin, e.what()));
  }
}

ModelConfig loadModelConfig(const std::filesystem::path& path) {
  const std::string origin = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError("", fmt::format("cannot read config {}: it is a directory", origin));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("", fmt::format("cannot read config {}: {}", origin, std::strerror(errno)));
  // Read at most one chunk past the limit, so pipes and growing files are bounded too.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxConfigBytes && in.read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw UserError("", fmt::format("cannot read config {}: read error", origin));
  if (text.size() > kMaxConfigBytes) {
    throw UserError("", fmt::format("config {} is larger than the limit of {} bytes", origin, kMaxConfigBytes));
  }
  return parseModelConfig(text, origin);
}

ModelConfig applyOverrides(const ModelConfig& config, const RunOverrides& o) {
  const Reader r("");
  ModelConfig c = config;
  FieldNames names;
  if (o.batch) {
    names.batch = "--batch";
    c.run.batch = overrideValue(r, *o.batch, names.batch, 1, kMaxBatch);
  }
  if (o.promptLen) {
    names.promptLen = "--prompt-len";
    c.run.promptLen = overrideValue(r, *o.promptLen, names.promptLen, 1, kMaxContext);
  }
  if (o.decodeTokens) {
    names.decodeTokens = "--decode-tokens";
    c.run.decodeTokens = overrideValue(r, *o.decodeTokens, names.decodeTokens, 0, kMaxContext);
  }
  if (o.layers) {
    names.layers = "--layers";
    c.run.layers = overrideValue(r, *o.layers, names.layers, 1, kMaxLayers);
  }
  if (o.dtype) {
    names.dtype = "--dtype";
    c.run.dtype = r.runDTypeNamed(*o.dtype, names.dtype);
  }
  checkRelations(r, c, names, o.promptLen.has_value(), o.decodeTokens.has_value());
  return c;
}

}  // namespace foundry
