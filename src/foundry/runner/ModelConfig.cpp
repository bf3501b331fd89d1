#include "foundry/runner/ModelConfig.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/StorageFormat.h"
#include "foundry/runner/ConfigSchema.h"
#include "foundry/runner/io/Json.h"
#include "foundry/steps/Options.h"
#include "foundry/steps/PagedKv.h"

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
constexpr Key kAttentionKeys[] = {{"layers", true},     {"n_heads", true},     {"n_kv_heads", true},
                                  {"head_dim", true},   {"max_context", true}, {"rope", false},
                                  {"query_pre_attn_scalar", false}, {"modifiers", false}, {"value_dim", false},
                                  {"latent_values", false}, {"softmax_scale", false}};
constexpr Key kRopeKeys[] = {{"theta", true}, {"pairing", true}, {"rotary_dims", false}, {"scaling", false},
                             {"yarn", false}};
constexpr Key kYarnKeys[] = {{"factor", true},          {"original_max_position", true}, {"beta_fast", false},
                             {"beta_slow", false},      {"truncate", false},             {"attention_factor", false},
                             {"mscale", false},         {"mscale_all_dim", false}};
// Each modifier type's keys; "type" and "layers" are common.
constexpr Key kWindowKeys[] = {{"type", true}, {"layers", false}, {"window", false}, {"left", false}, {"right", false}};
constexpr Key kSoftCapKeys[] = {{"type", true}, {"layers", false}, {"cap", true}};
constexpr Key kAlibiKeys[] = {{"type", true}, {"layers", false}, {"slopes", false}};
constexpr Key kSinksKeys[] = {{"type", true}, {"layers", false}, {"values", false}};
constexpr Key kLayerPatternKeys[] = {{"every", true}, {"offset", false}};
constexpr std::string_view kModifierTypes[] = {"sliding_window", "soft_cap", "alibi", "sinks"};
constexpr Key kScalingKeys[] = {{"type", true},
                                {"factor", true},
                                {"low_freq_factor", true},
                                {"high_freq_factor", true},
                                {"original_max_position", true}};
constexpr Key kRunKeys[] = {{"batch", true}, {"prompt_len", true}, {"decode_tokens", true}, {"layers", false},
                            {"dtype", true}, {"kv_dtype", false}, {"seed", false}, {"check", false},
                            {"page_size", false}, {"prompt_lens", false}};

// Rope scaling types Hugging Face configs use; only llama3 is implemented.
constexpr std::string_view kKnownRopeScalings[] = {"linear", "dynamic", "yarn", "longrope", "llama3"};


// The name an error uses for each field a command-line flag can override.
struct FieldNames {
  std::string batch = "/run/batch";
  std::string promptLen = "/run/prompt_len";
  std::string decodeTokens = "/run/decode_tokens";
  std::string layers = "/run/layers";
  std::string dtype = "/run/dtype";
  std::string kvDtype = "/run/kv_dtype";
  std::string pageSize = "/run/page_size";
  std::string promptLens = "/run/prompt_lens";
};

const json kNoDocument = json::object();

// Reads typed values out of a parsed document; every failure names the JSON pointer and the origin.
// Ranges, lengths and enums come from configs/schema.json at the value's pointer (schemaRangeAt).
class Reader {
 public:
  explicit Reader(std::string origin, const json& doc = kNoDocument) : origin_(std::move(origin)), doc_(doc) {}

  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw UserError(field, withOrigin(message));
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& message) const {
    throw UnsupportedError(withOrigin(fmt::format("{}: {}", field, message)));
  }

  /// `value` must be an array with as many items as the schema allows at `pointer`.
  void array(const json& value, const std::string& pointer) const {
    const SchemaRange range = schemaRangeAt(doc_, pointer);
    if (!value.is_array() || value.size() < range.minLength || value.size() > range.maxLength) {
      fail(pointer, fmt::format("expected an array of {} to {} items, found {}", range.minLength, range.maxLength,
                                describeJsonValue(value)));
    }
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

  std::uint32_t integer(const json& v, const std::string& field) const {
    const auto [lo, hi] = integerRange(field);
    return checkedInteger(v, field, lo, hi);
  }

  /// The schema's [minimum, maximum] at `field`, which must be a bounded range of 32-bit integers.
  std::pair<std::uint32_t, std::uint32_t> integerRange(const std::string& field) const {
    const SchemaRange range = schemaRangeAt(doc_, field);
    const double top = std::numeric_limits<std::uint32_t>::max();
    if (range.exclusiveMinimum || !(range.minimum >= 0) || !(range.maximum <= top) || range.minimum > range.maximum) {
      throw InternalError(fmt::format("configs/schema.json gives {} no range of 32-bit unsigned integers", field));
    }
    return {static_cast<std::uint32_t>(range.minimum), static_cast<std::uint32_t>(range.maximum)};
  }

  std::uint64_t seed(const json& v, const std::string& field) const {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      fail(field, fmt::format("expected an integer from 0 to {}, found {}", std::numeric_limits<std::uint64_t>::max(),
                              describeJsonValue(v)));
    }
    return v.get<std::uint64_t>();
  }

  /// A number in the schema's range at `field`: (lo, hi] where the minimum is exclusive, else [lo, hi].
  double number(const json& v, const std::string& field) const {
    const SchemaRange range = schemaRangeAt(doc_, field);
    const double lo = range.minimum, hi = range.maximum;
    const bool loExclusive = range.exclusiveMinimum;
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

  std::string string(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, fmt::format("expected a string, found {}", describeJsonValue(v)));
    const SchemaRange range = schemaRangeAt(doc_, field);
    const std::size_t maxChars = range.maxLength;
    const auto& s = v.get_ref<const std::string&>();
    if (range.minLength > 0 && s.empty()) fail(field, "expected a non-empty string, found \"\"");
    if (s.size() > maxChars) {
      fail(field, fmt::format("expected at most {} characters, found {}", maxChars, s.size()));
    }
    return s;
  }

  bool boolean(const json& v, const std::string& field) const {
    if (!v.is_boolean()) fail(field, fmt::format("expected true or false, found {}", describeJsonValue(v)));
    return v.get<bool>();
  }

  /// One of the schema's enum strings at `schemaField`; errors name `field` (a pointer or a flag).
  std::string choice(const json& v, const std::string& field, const std::string& schemaField) const {
    const SchemaRange range = schemaRangeAt(doc_, schemaField);
    std::string accepted;
    for (std::size_t i = 0; i < range.enumStrings.size(); ++i) {
      accepted += fmt::format("{}\"{}\"", i == 0 ? "" : i + 1 == range.enumStrings.size() ? " or " : ", ",
                              range.enumStrings[i]);
    }
    const auto known = [&](const std::string& s) {
      return std::find(range.enumStrings.begin(), range.enumStrings.end(), s) != range.enumStrings.end();
    };
    if (!v.is_string()) fail(field, fmt::format("expected {}, found {}", accepted, describeJsonValue(v)));
    const std::string& s = v.get_ref<const std::string&>();
    if (!known(s)) fail(field, fmt::format("expected {}, found {}", accepted, quoteForMessage(s)));
    return s;
  }

  /// `schemaField`: /run/dtype (f16, bf16, f32) or /run/kv_dtype (also int8, q8_0).
  DType runDType(const json& v, const std::string& field, const std::string& schemaField = "/run/dtype") const {
    return *parseDType(choice(v, field, schemaField));
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
    Options scratch;
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
  const json& doc_;
};

// Per layer: at most one modifier of a type (two of one kind would share its push constants and
// buffers), layer indices inside the model, per-head values for every head.
void checkModifiers(const Reader& r, const ModelConfig& c) {
  for (std::size_t i = 0; i < c.modifiers.size(); ++i) {
    const auto& m = c.modifiers[i];
    const std::string at = fmt::format("/attention/modifiers/{}", i);
    if (m.layers.list.empty() && m.layers.offset >= m.layers.every) {
      r.fail(at + "/layers/offset", fmt::format("expected an integer from 0 to {} (below every), found {}",
                                                m.layers.every - 1, m.layers.offset));
    }
    for (std::size_t j = 0; j < m.layers.list.size(); ++j) {
      if (m.layers.list[j] >= c.layers) {
        r.fail(fmt::format("{}/layers/{}", at, j),
               fmt::format("layer {} does not exist: {} has layers 0 to {}", m.layers.list[j], c.name, c.layers - 1));
      }
    }
    if (!m.values.empty() && m.values.size() != c.nHeads) {
      r.fail(at + (m.kind == ModifierConfig::Kind::Alibi ? "/slopes" : "/values"),
             fmt::format("expected one value per query head ({}), found {}", c.nHeads, m.values.size()));
    }
    for (std::size_t j = 0; j < i; ++j) {
      const auto& o = c.modifiers[j];
      // ALiBi's bias enters the logit before every score modifier (the fa_distance_bias hook), so a
      // list that puts one first would not be applied as written.
      const bool biasAfterScore = m.kind == ModifierConfig::Kind::Alibi && o.kind == ModifierConfig::Kind::SoftCap;
      if (o.kind != m.kind && !biasAfterScore) continue;
      for (std::uint32_t l = 0; l < c.layers; ++l) {
        if (!m.layers.matches(l) || !o.layers.matches(l)) continue;
        if (biasAfterScore) {
          r.fail(at, fmt::format("alibi comes after soft_cap (modifier {}) on layer {}, but ALiBi's bias is added to "
                                 "the logit before any score modifier: list alibi before soft_cap",
                                 j, l));
        }
        r.fail(at, fmt::format("modifiers {} and {} are both {} on layer {}: at most one of a type per layer", j, i,
                               m.typeName(), l));
      }
    }
  }
}

// The cache's storage against the rows it holds, and its pages against its storage.
void checkCacheRules(const Reader& r, const ModelConfig& c, const FieldNames& names) {
  if (const QuantBlocks& b = storageFormat(c.run.cacheType()).blocks; b.inlineScales) {
    // Each row of such a cache is whole blocks (a scale, then its values).
    for (const std::uint32_t dim : {c.headDim, c.vDim()}) {
      if (dim % b.dims != 0) {
        r.fail(names.kvDtype, fmt::format("{} rows are whole blocks of {} values, but this model's rows hold {}; "
                                          "accepted here: f16, bf16, f32 or int8",
                                          dtypeName(c.run.cacheType()), b.dims, dim));
      }
    }
  }
  if (const std::string why = pageSizeProblem(c.run.pageSize, c.run.cacheType()); !why.empty()) {
    r.fail(names.pageSize, why);
  }
}

// The rules that tie fields together; run after parsing and again after command-line overrides.
void checkRelations(const Reader& r, const ModelConfig& c, const FieldNames& names, const RunOverrides& overrides) {
  const bool promptOverridden = overrides.promptLen || overrides.promptLens;
  const bool decodeOverridden = overrides.decodeTokens.has_value();
  if (const std::string why = headGroupProblem(c.nHeads, c.nKvHeads, "n_heads", "n_kv_heads"); !why.empty()) {
    r.fail("/attention/n_kv_heads", why);
  }
  if (c.rope && c.rope->rotaryDims > c.headDim) {
    r.fail("/attention/rope/rotary_dims",
           fmt::format("rotary_dims ({}) cannot exceed head_dim ({})", c.rope->rotaryDims, c.headDim));
  }
  if (c.rope && c.rope->rotaryDims <= c.headDim && c.rope->dims(c.headDim) % 2 != 0) {
    const bool given = c.rope->rotaryDims != 0;
    r.fail(given ? "/attention/rope/rotary_dims" : "/attention/head_dim",
           fmt::format("RoPE rotates pairs of dimensions, so it needs an even count: {} {}; accepted: an even "
                       "rotary_dims at most head_dim{}",
                       given ? "rotary_dims" : "head_dim (the rotated count when rotary_dims is not given)",
                       c.rope->dims(c.headDim), given ? "" : ", or an even head_dim"));
  }
  if (c.latentValues) {
    if (c.valueDim == 0 || c.valueDim >= c.headDim) {
      r.fail("/attention/value_dim",
             fmt::format("latent_values reads the values from the last value_dim columns of each key row: value_dim "
                         "must be given and below head_dim ({}), found {}", c.headDim, c.vDim()));
    }
    const std::uint32_t rotary = c.rope ? c.rope->dims(c.headDim) : 0;
    if (rotary > c.headDim - c.valueDim) {
      r.fail("/attention/rope/rotary_dims",
             fmt::format("the {} rotated dimensions would overlap the values (the last {} of {}): with latent_values "
                         "rotary_dims is at most head_dim - value_dim = {}", rotary, c.valueDim, c.headDim,
                         c.headDim - c.valueDim));
    }
    if (quantized(c.run.cacheType())) {
      r.unsupported(names.kvDtype, fmt::format("{} caches with latent_values: the values would read their "
                                               "scales through a view of the keys' scales, which is not built; "
                                               "accepted: f16, bf16, f32",
                                               dtypeName(c.run.cacheType())));
    }
  }
  if (c.rope && c.rope->yarn && c.rope->yarn->originalMaxPosition > c.maxContext) {
    r.fail("/attention/rope/yarn/original_max_position",
           fmt::format("original_max_position ({}) cannot exceed max_context ({})", c.rope->yarn->originalMaxPosition,
                       c.maxContext));
  }
  if (c.rope && c.rope->llama3 && c.rope->yarn) {
    r.fail("/attention/rope/yarn", "a rope has one frequency scaling: llama3 (/attention/rope/scaling) or yarn, not both");
  }
  if (c.rope && c.rope->yarn && !(c.rope->yarn->betaFast > c.rope->yarn->betaSlow)) {
    r.fail("/attention/rope/yarn/beta_fast", fmt::format("beta_fast ({}) must be greater than beta_slow ({})",
                                                         c.rope->yarn->betaFast, c.rope->yarn->betaSlow));
  }
  checkModifiers(r, c);
  if (c.rope && c.rope->llama3) {
    const auto& s = *c.rope->llama3;
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
  if (!c.run.promptLens.empty()) {
    if (c.run.promptLens.size() != c.run.batch) {
      r.fail(names.promptLens, fmt::format("{} prompt lengths for a batch of {}; give one per sequence",
                                           c.run.promptLens.size(), c.run.batch));
    }
    for (std::size_t b = 0; b < c.run.promptLens.size(); ++b) {
      if (c.run.promptLens[b] > c.run.promptLen) {
        r.fail(names.promptLens == "--prompt-lens" ? names.promptLens : fmt::format("{}/{}", names.promptLens, b),
               fmt::format("sequence {}'s prompt of {} tokens is longer than prompt_len ({})", b, c.run.promptLens[b],
                           c.run.promptLen));
      }
    }
  }
  checkCacheRules(r, c, names);
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
}

RopeSpec readRope(const Reader& r, const json& rope) {
  r.object(rope, "/attention/rope", kRopeKeys);
  RopeSpec spec;
  spec.theta = r.number(rope.at("theta"), "/attention/rope/theta");
  const std::string pairing = r.choice(rope.at("pairing"), "/attention/rope/pairing", "/attention/rope/pairing");
  spec.pairing = pairing == "interleaved" ? RopePairing::Interleaved : RopePairing::RotateHalf;
  if (rope.contains("rotary_dims")) {
    spec.rotaryDims = r.integer(rope.at("rotary_dims"), "/attention/rope/rotary_dims");
    if (spec.rotaryDims % 2 != 0) {
      r.fail("/attention/rope/rotary_dims",
             fmt::format("expected an even number (dimensions rotate in pairs), found {}", spec.rotaryDims));
    }
  }
  if (rope.contains("scaling")) {
    const json& s = rope.at("scaling");
    const std::string p = "/attention/rope/scaling";
    r.object(s, p, kScalingKeys);
    const std::string type = r.string(s.at("type"), p + "/type");
    if (type == "yarn") {
      r.fail(p + "/type", "YaRN goes in /attention/rope/yarn (factor, original_max_position, beta_fast, beta_slow, "
                          "truncate, attention_factor)");
    }
    if (type != "llama3") {
      const bool known = std::find(std::begin(kKnownRopeScalings), std::end(kKnownRopeScalings), type) !=
                         std::end(kKnownRopeScalings);
      if (known) {
        r.unsupported(p + "/type",
                      fmt::format("rope scaling \"{}\" is not supported; supported: llama3 (here), yarn (/attention/rope/yarn)",
                                  type));
      }
      r.fail(p + "/type", fmt::format("expected \"llama3\", found {}", quoteForMessage(type)));
    }
    Llama3Scaling l;
    l.factor = r.number(s.at("factor"), p + "/factor");
    l.lowFreqFactor = r.number(s.at("low_freq_factor"), p + "/low_freq_factor");
    l.highFreqFactor = r.number(s.at("high_freq_factor"), p + "/high_freq_factor");
    l.originalMaxPosition = r.integer(s.at("original_max_position"), p + "/original_max_position");
    spec.llama3 = l;
  }
  if (rope.contains("yarn")) {
    const std::string p = "/attention/rope/yarn";
    const json& y = rope.at("yarn");
    r.object(y, p, kYarnKeys);
    YarnScaling ys;
    ys.factor = r.number(y.at("factor"), p + "/factor");
    ys.originalMaxPosition = r.integer(y.at("original_max_position"), p + "/original_max_position");
    if (y.contains("beta_fast")) ys.betaFast = r.number(y.at("beta_fast"), p + "/beta_fast");
    if (y.contains("beta_slow")) ys.betaSlow = r.number(y.at("beta_slow"), p + "/beta_slow");
    if (y.contains("truncate")) ys.truncate = r.boolean(y.at("truncate"), p + "/truncate");
    if (y.contains("attention_factor")) {
      ys.attentionFactor = r.number(y.at("attention_factor"), p + "/attention_factor");
    }
    if (y.contains("mscale")) ys.mscale = r.number(y.at("mscale"), p + "/mscale");
    if (y.contains("mscale_all_dim")) ys.mscaleAllDim = r.number(y.at("mscale_all_dim"), p + "/mscale_all_dim");
    spec.yarn = ys;
  }
  return spec;
}

LayerSelector readLayers(const Reader& r, const json& v, const std::string& p) {
  LayerSelector sel;
  if (v.is_array()) {
    if (v.empty()) r.fail(p, "expected at least one layer index");
    for (std::size_t i = 0; i < v.size(); ++i) {
      sel.list.push_back(r.integer(v[i], fmt::format("{}/{}", p, i)));
    }
    return sel;
  }
  if (!v.is_object()) {
    r.fail(p, fmt::format("expected an array of layer indices or {{\"every\": N, \"offset\": K}}, found {}",
                          describeJsonValue(v)));
  }
  r.object(v, p, kLayerPatternKeys);
  sel.every = r.integer(v.at("every"), p + "/every");
  if (v.contains("offset")) sel.offset = r.integer(v.at("offset"), p + "/offset");
  return sel;
}

std::vector<double> readPerHead(const Reader& r, const json& v, const std::string& p) {
  if (!v.is_array() || v.empty()) r.fail(p, fmt::format("expected an array of numbers, found {}", describeJsonValue(v)));
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) out.push_back(r.number(v[i], fmt::format("{}/{}", p, i)));
  return out;
}

std::vector<ModifierConfig> readModifiers(const Reader& r, const json& v) {
  const std::string base = "/attention/modifiers";
  if (!v.is_array()) r.fail(base, fmt::format("expected an array of modifiers, found {}", describeJsonValue(v)));
  std::vector<ModifierConfig> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& m = v[i];
    const std::string p = fmt::format("{}/{}", base, i);
    if (!m.is_object() || !m.contains("type") || !m.at("type").is_string()) {
      r.fail(p + "/type", fmt::format("each modifier is an object with a \"type\": {}",
                                      fmt::join(kModifierTypes, ", ")));
    }
    const std::string type = m.at("type").get<std::string>();
    ModifierConfig c;
    if (type == "sliding_window") {
      r.object(m, p, kWindowKeys);
      c.kind = ModifierConfig::Kind::SlidingWindow;
      const bool extents = m.contains("left") || m.contains("right");
      if (m.contains("window") == extents) {
        r.fail(p + "/window", "give either \"window\" (the query and the window - 1 keys before it, as Hugging Face's "
                              "sliding_window) or \"left\" and \"right\" (FlashAttention's window_size)");
      }
      if (m.contains("window")) {
        c.left = r.integer(m.at("window"), p + "/window") - 1;
      } else {
        if (m.contains("left")) c.left = r.integer(m.at("left"), p + "/left");
        if (m.contains("right")) c.right = r.integer(m.at("right"), p + "/right");
      }
    } else if (type == "soft_cap") {
      r.object(m, p, kSoftCapKeys);
      c.kind = ModifierConfig::Kind::SoftCap;
      c.cap = r.number(m.at("cap"), p + "/cap");
    } else if (type == "alibi") {
      r.object(m, p, kAlibiKeys);
      c.kind = ModifierConfig::Kind::Alibi;
      if (m.contains("slopes")) c.values = readPerHead(r, m.at("slopes"), p + "/slopes");
    } else if (type == "sinks") {
      r.object(m, p, kSinksKeys);
      c.kind = ModifierConfig::Kind::Sinks;
      if (m.contains("values")) c.values = readPerHead(r, m.at("values"), p + "/values");
    } else {
      r.fail(p + "/type", fmt::format("unknown modifier type {}; accepted: {}", quoteForMessage(type),
                                      fmt::join(kModifierTypes, ", ")));
    }
    if (m.contains("layers")) c.layers = readLayers(r, m.at("layers"), p + "/layers");
    out.push_back(std::move(c));
  }
  return out;
}

ModelConfig readConfig(const Reader& r, const json& doc) {
  r.object(doc, "", kTopKeys);
  ModelConfig c;
  if (doc.contains("$schema")) r.string(doc.at("$schema"), "/$schema");
  c.name = r.string(doc.at("name"), "/name");
  c.source = r.string(doc.at("source"), "/source");
  if (doc.contains("note")) c.note = r.string(doc.at("note"), "/note");

  const json& a = doc.at("attention");
  r.object(a, "/attention", kAttentionKeys);
  c.layers = r.integer(a.at("layers"), "/attention/layers");
  c.nHeads = r.integer(a.at("n_heads"), "/attention/n_heads");
  c.nKvHeads = r.integer(a.at("n_kv_heads"), "/attention/n_kv_heads");
  c.headDim = r.integer(a.at("head_dim"), "/attention/head_dim");
  c.maxContext = r.integer(a.at("max_context"), "/attention/max_context");
  if (a.contains("rope")) c.rope = readRope(r, a.at("rope"));
  if (a.contains("value_dim")) c.valueDim = r.integer(a.at("value_dim"), "/attention/value_dim");
  if (a.contains("latent_values")) c.latentValues = r.boolean(a.at("latent_values"), "/attention/latent_values");
  if (a.contains("query_pre_attn_scalar") && a.contains("softmax_scale")) {
    r.fail("/attention/softmax_scale", "give the softmax scale once: softmax_scale or query_pre_attn_scalar, not both");
  }
  if (a.contains("query_pre_attn_scalar")) {
    c.softmaxScale = 1.0 / std::sqrt(r.number(a.at("query_pre_attn_scalar"), "/attention/query_pre_attn_scalar"));
  }
  if (a.contains("softmax_scale")) c.softmaxScale = r.number(a.at("softmax_scale"), "/attention/softmax_scale");
  if (a.contains("modifiers")) c.modifiers = readModifiers(r, a.at("modifiers"));

  const json& run = doc.at("run");
  r.object(run, "/run", kRunKeys);
  c.run.batch = r.integer(run.at("batch"), "/run/batch");
  c.run.promptLen = r.integer(run.at("prompt_len"), "/run/prompt_len");
  c.run.decodeTokens = r.integer(run.at("decode_tokens"), "/run/decode_tokens");
  c.run.layers = run.contains("layers") ? r.integer(run.at("layers"), "/run/layers") : c.layers;
  c.run.dtype = r.runDType(run.at("dtype"), "/run/dtype");
  if (run.contains("kv_dtype")) c.run.kvDtype = r.runDType(run.at("kv_dtype"), "/run/kv_dtype", "/run/kv_dtype");
  if (run.contains("seed")) c.run.seed = r.seed(run.at("seed"), "/run/seed");
  if (run.contains("check")) c.run.check = r.boolean(run.at("check"), "/run/check");
  if (run.contains("page_size")) c.run.pageSize = r.integer(run.at("page_size"), "/run/page_size");
  if (run.contains("prompt_lens")) {
    const json& lens = run.at("prompt_lens");
    r.array(lens, "/run/prompt_lens");
    for (std::size_t i = 0; i < lens.size(); ++i) {
      c.run.promptLens.push_back(r.integer(lens[i], fmt::format("/run/prompt_lens/{}", i)));
    }
  }

  if (doc.contains("tuning")) {
    r.tuning(doc.at("tuning"), "/tuning");
    c.tuning = doc.at("tuning");
  }
  return c;
}

// Every field passed its own checks; the schema then has the last word on each value (a rule the
// loader lacks is still enforced, and the test in tests/config keeps the two equal).
void checkSchema(const Reader& r, const json& doc) {
  if (const auto violation = validateAgainstSchema(doc, configSchema())) r.fail(violation->pointer, violation->message);
}

// A flag's value, in the range the schema gives the config field it replaces.
std::uint32_t overrideValue(const Reader& r, std::int64_t value, const std::string& flag, const std::string& field) {
  const auto [lo, hi] = r.integerRange(field);
  if (value < static_cast<std::int64_t>(lo) || value > static_cast<std::int64_t>(hi)) {
    r.fail(flag, fmt::format("expected an integer from {} to {}, found {}", lo, hi, value));
  }
  return static_cast<std::uint32_t>(value);
}

// "100,2000,4096": each an integer in /run/prompt_lens's range, at most /run/prompt_lens's count.
std::vector<std::uint32_t> promptLengths(const std::string& text) {
  const json shape = {{"run", {{"prompt_lens", json::array({1})}}}};
  const Reader r("", shape);
  const auto [lo, hi] = r.integerRange("/run/prompt_lens/0");
  const SchemaRange count = schemaRangeAt(shape, "/run/prompt_lens");
  std::vector<std::uint32_t> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < lo || value > hi) {
      r.fail("--prompt-lens", fmt::format("'{}': expected comma-separated integers from {} to {}, found '{}'",
                                          printable(text), lo, hi, printable(item)));
    }
    out.push_back(static_cast<std::uint32_t>(value));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() > count.maxLength) {
    r.fail("--prompt-lens", fmt::format("{} prompt lengths; at most {} (one per sequence)", out.size(), count.maxLength));
  }
  return out;
}

}  // namespace

bool LayerSelector::matches(std::uint32_t layer) const {
  if (!list.empty()) return std::find(list.begin(), list.end(), layer) != list.end();
  return layer % every == offset;
}

std::string ModifierConfig::typeName() const {
  switch (kind) {
    case Kind::SlidingWindow: return "sliding_window";
    case Kind::SoftCap: return "soft_cap";
    case Kind::Alibi: return "alibi";
    case Kind::Sinks: return "sinks";
  }
  return "?";
}

std::vector<ModifierConfig> ModelConfig::modifiersOf(std::uint32_t layer) const {
  std::vector<ModifierConfig> out;
  for (const auto& m : modifiers) {
    if (m.layers.matches(layer)) out.push_back(m);
  }
  return out;
}

namespace {

// `o` applied to `c`, each value checked in its own range; returns the names the rules between fields blame.
FieldNames applyRunOverrides(ModelConfig& c, const RunOverrides& o) {
  const Reader r("");
  FieldNames names;
  const auto integer = [&](const std::optional<std::int64_t>& value, std::string& name, const char* flag,
                           const char* field, std::uint32_t& out) {
    if (!value) return;
    name = flag;
    out = overrideValue(r, *value, name, field);
  };
  integer(o.batch, names.batch, "--batch", "/run/batch", c.run.batch);
  integer(o.promptLen, names.promptLen, "--prompt-len", "/run/prompt_len", c.run.promptLen);
  // --prompt-len alone gives every sequence that prompt, over a run section's prompt_lens.
  if (o.promptLen && !o.promptLens) c.run.promptLens.clear();
  integer(o.decodeTokens, names.decodeTokens, "--decode-tokens", "/run/decode_tokens", c.run.decodeTokens);
  integer(o.layers, names.layers, "--layers", "/run/layers", c.run.layers);
  if (o.dtype) {
    names.dtype = "--dtype";
    c.run.dtype = r.runDType(json(*o.dtype), names.dtype);
  }
  if (o.kvDtype) {
    names.kvDtype = "--kv-dtype";
    c.run.kvDtype = r.runDType(json(*o.kvDtype), names.kvDtype, "/run/kv_dtype");
  }
  integer(o.pageSize, names.pageSize, "--page-size", "/run/page_size", c.run.pageSize);
  if (o.promptLens) {
    names.promptLens = "--prompt-lens";
    c.run.promptLens = promptLengths(*o.promptLens);
    if (!o.batch) c.run.batch = static_cast<std::uint32_t>(c.run.promptLens.size());
    if (!o.promptLen) {
      c.run.promptLen = *std::max_element(c.run.promptLens.begin(), c.run.promptLens.end());
      names.promptLen = names.promptLens;
    }
  }
  return names;
}

}  // namespace

ModelConfig parseModelConfig(std::string_view text, const std::string& origin, const RunOverrides& overrides) {
  if (text.size() > kMaxConfigBytes) {
    Reader(origin).fail("", fmt::format("config is {} bytes; the limit is {} bytes", text.size(), kMaxConfigBytes));
  }
  const json doc = parseJsonStrict(text, origin);
  const Reader r(origin, doc);
  try {
    ModelConfig c = readConfig(r, doc);
    checkSchema(r, doc);
    // The rules between fields hold for the run as the flags leave it, not as the file gives it.
    const FieldNames names = applyRunOverrides(c, overrides);
    checkRelations(r, c, names, overrides);
    return c;
  } catch (const json::exception& e) {
    // Every access above is checked first; reaching this is a bug, but still not a crash.
    throw InternalError(fmt::format("reading {}: {}", origin, e.what()));
  }
}

ModelConfig readModelConfigFields(const nlohmann::json& doc, const std::string& origin) {
  return readConfig(Reader(origin, doc), doc);
}

ModelConfig loadModelConfig(const std::filesystem::path& path, const RunOverrides& overrides) {
  const std::string origin = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError("", fmt::format("cannot read config {}: it is a directory", origin));
  }
  // A FIFO without a writer reads as empty rather than holding the run at its open.
  const int fd = openForReading(path);
  if (fd < 0) throw UserError("", fmt::format("cannot read config {}: {}", origin, std::strerror(errno)));
  // Read at most one chunk past the limit, so pipes and growing files are bounded too.
  std::string text;
  char chunk[1 << 16];
  ssize_t n = 0;
  while (text.size() <= kMaxConfigBytes && (n = ::read(fd, chunk, sizeof chunk)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  const int readErrno = errno;
  ::close(fd);
  if (n < 0) throw UserError("", fmt::format("cannot read config {}: {}", origin, std::strerror(readErrno)));
  if (text.size() > kMaxConfigBytes) {
    throw UserError("", fmt::format("config {} is larger than the limit of {} bytes", origin, kMaxConfigBytes));
  }
  return parseModelConfig(text, origin, overrides);
}

ModelConfig applyOverrides(const ModelConfig& config, const RunOverrides& o) {
  ModelConfig c = config;
  const FieldNames names = applyRunOverrides(c, o);
  checkRelations(Reader(""), c, names, o);
  return c;
}

LayoutFlags checkLayoutFlags(std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim,
                             const std::optional<std::string>& dtype, const std::optional<std::string>& kvDtype,
                             std::optional<std::int64_t> pageSize) {
  const Reader r("");
  const HeadFlags h{overrideValue(r, heads, "--heads", "/attention/n_heads"),
                    overrideValue(r, kvHeads, "--kv-heads", "/attention/n_kv_heads"),
                    overrideValue(r, headDim, "--head-dim", "/attention/head_dim")};
  if (const std::string why = headGroupProblem(h.heads, h.kvHeads, "--heads", "--kv-heads"); !why.empty()) {
    r.fail("--kv-heads", why);
  }
  ModelConfig c;
  c.nHeads = h.heads;
  c.nKvHeads = h.kvHeads;
  c.headDim = h.headDim;
  const FieldNames names = applyRunOverrides(c, {.dtype = dtype, .kvDtype = kvDtype, .pageSize = pageSize});
  checkCacheRules(r, c, names);
  return {h, c.run.dtype, c.run.cacheType(), c.run.pageSize};
}

}  // namespace foundry
