// configs/schema.json and the loader agree on every range and enum: each minimum and maximum is moved
// by one each way, each enum value is tried and so are values just outside the enum, and the loader's
// own field checks (readModelConfigFields, which look their ranges up in the schema: schemaRangeAt)
// must accept exactly what the schema accepts. The rules
// between fields are the loader's alone and are not part of this comparison.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"
#include "foundry/runner/ConfigSchema.h"
#include "foundry/runner/ModelConfig.h"

namespace foundry {
namespace {

using json = nlohmann::json;

// Every property the schema describes, each with a value its own checks accept (the rules between
// fields do not apply here: scaling and yarn together, two sliding windows).
json everyField() {
  return json::parse(R"({
    "$schema": "schema.json", "name": "Every field", "source": "test/every", "note": "n",
    "attention": {
      "layers": 1024, "n_heads": 1024, "n_kv_heads": 1, "head_dim": 1024, "max_context": 16777216,
      "rope": {"theta": 10000, "pairing": "rotate_half", "rotary_dims": 64,
               "scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                           "original_max_position": 8192},
               "yarn": {"factor": 4, "original_max_position": 4096, "beta_fast": 32, "beta_slow": 1,
                        "truncate": false, "attention_factor": 1, "mscale": 1, "mscale_all_dim": 1}},
      "query_pre_attn_scalar": 256,
      "modifiers": [
        {"type": "sliding_window", "window": 4096, "layers": [0]},
        {"type": "sliding_window", "left": 8, "right": 0, "layers": {"every": 1024, "offset": 0}},
        {"type": "alibi", "slopes": [0.5]},
        {"type": "soft_cap", "cap": 50},
        {"type": "sinks", "values": [1.0]}
      ]
    },
    "run": {"batch": 1, "prompt_len": 64, "decode_tokens": 8, "layers": 1, "dtype": "f16", "seed": 1,
            "check": true},
    "tuning": {
      "disable_fa": 0, "sdpa_force_materialized": 0, "debug_sdpa": 0, "debug_sdpa_verbose": 0,
      "sdpa_debug_online_compare": 0, "fa_prefill_warps": "auto", "fa_prefill_split_k": "auto",
      "disable_fa_prefill_splitk": 0, "fa_prefill_coopmat": "auto", "fa_prefill_register_softmax": "auto",
      "fa_prefill_keys_per_tile": "auto",
      "fa_prefill_heads_first": "auto", "fa_decode_warps": "auto", "fa_decode_keys_per_warp": "auto",
      "fa_decode_scalar": 0, "fa_decode_tg_out": "auto", "fa_decode_vec": "auto", "fa_decode_unroll": "auto",
      "fa_decode_split_k": "auto", "fa_decode_fused_reduce": "auto", "decode_replay": "auto",
      "device": "0", "cache_dir": "off",
      "dump_kernels": "d", "kernel_dir": "k", "log_level": "warn", "validation": 0
    }
  })");
}

const json& schema() { return configSchema(); }

const json& resolve(const json& node) {
  if (!node.is_object() || !node.contains("$ref")) return node;
  return schema().at(json::json_pointer(node.at("$ref").get<std::string>().substr(1)));
}

// Whether a oneOf/anyOf branch describes `value`: a modifier branch only the modifier of its type,
// an array or object branch only arrays or objects.
bool branchApplies(const json& branch, const json& value) {
  if (branch.contains("type") && branch.at("type") == "array" && !value.is_array()) return false;
  if (branch.contains("type") && branch.at("type") == "object" && !value.is_object()) return false;
  if (branch.contains("properties") && branch.at("properties").contains("type")) {
    const json& t = branch.at("properties").at("type");
    if (t.contains("const") && (!value.is_object() || value.value("type", json()) != t.at("const"))) return false;
  }
  return true;
}

/// One constrained schema node and a place in the document it governs.
struct Constrained {
  json::json_pointer at;
  json node;
};

void collect(const json& schemaNode, const json& doc, const json::json_pointer& at, std::vector<Constrained>& out) {
  const json& node = resolve(schemaNode);
  const json& value = doc.at(at);
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "enum", "const", "minLength", "maxLength",
                          "minItems"}) {
    if (node.contains(key)) {
      out.push_back({at, node});
      break;
    }
  }
  for (const char* any : {"oneOf", "anyOf"}) {
    if (!node.contains(any)) continue;
    for (const auto& branch : node.at(any)) {
      if (branchApplies(resolve(branch), value)) collect(branch, doc, at, out);
    }
  }
  if (node.contains("properties") && value.is_object()) {
    for (const auto& [key, child] : node.at("properties").items()) {
      if (value.contains(key)) collect(child, doc, at / key, out);
    }
  }
  if (node.contains("items") && value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) collect(node.at("items"), doc, at / i, out);
  }
}

// The values to try at a constrained node: each bound and its neighbours, each enum value and its
// neighbours, a string outside any enum; integers are tried as decimal strings too (knobs take both).
std::vector<json> probes(const json& node) {
  std::vector<json> out;
  const bool integer = node.value("type", "") == "integer";
  auto around = [&](const json& bound) {
    const double b = bound.get<double>();
    for (const double d : {-1.0, 0.0, 1.0}) {
      if (integer || bound.is_number_integer()) out.push_back(static_cast<std::int64_t>(b + d));
      else out.push_back(b + d);
    }
  };
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum"}) {
    if (node.contains(key)) around(node.at(key));
  }
  if (node.contains("enum") || node.contains("const")) {
    const json values = node.contains("enum") ? node.at("enum") : json::array({node.at("const")});
    std::set<std::int64_t> ints;
    for (const auto& v : values) {
      out.push_back(v);
      if (v.is_number_integer()) ints.insert(v.get<std::int64_t>());
    }
    if (!ints.empty()) {
      std::set<std::int64_t> outside = {*ints.begin() / 2, *ints.rbegin() * 2};
      for (const auto i : ints) outside.insert({i - 1, i + 1});
      for (const auto i : outside) {
        if (!ints.count(i)) out.push_back(i);
      }
    }
    out.push_back("not-in-the-enum");
  }
  for (const char* key : {"minLength", "maxLength"}) {
    if (!node.contains(key)) continue;
    const auto n = node.at(key).get<std::size_t>();
    for (const std::size_t len : {n == 0 ? 0 : n - 1, n, n + 1}) out.push_back(std::string(len, 'x'));
  }
  if (node.contains("minItems")) out.push_back(json::array());
  std::vector<json> strings;
  for (const auto& v : out) {
    if (v.is_number_integer()) strings.push_back(v.dump());
  }
  out.insert(out.end(), strings.begin(), strings.end());
  return out;
}

bool loaderAccepts(const json& doc, std::string& why) {
  try {
    readModelConfigFields(doc, "");
    return true;
  } catch (const Error& e) {
    why = e.what();
    return false;
  }
}

TEST(SchemaAgreement, TheBaseHasEveryFieldAndPassesBoth) {
  std::string why;
  EXPECT_TRUE(loaderAccepts(everyField(), why)) << why;
  const auto violation = validateAgainstSchema(everyField(), schema());
  EXPECT_FALSE(violation) << violation->pointer << ": " << violation->message;
}

TEST(SchemaAgreement, EveryRangeAndEnumIsTheLoaders) {
  const json base = everyField();
  std::vector<Constrained> nodes;
  collect(schema(), base, json::json_pointer(), nodes);
  ASSERT_GT(nodes.size(), 60u) << "the walk missed most of the schema";
  std::size_t compared = 0;
  std::set<std::string> pointers;
  for (const auto& [at, node] : nodes) {
    pointers.insert(at.to_string());
    for (const json& probe : probes(node)) {
      json doc = base;
      doc[at] = probe;
      std::string why;
      const bool loader = loaderAccepts(doc, why);
      const auto violation = validateAgainstSchema(doc, schema());
      ++compared;
      EXPECT_EQ(loader, !violation) << at.to_string() << " = " << probe.dump() << ": the loader "
                                    << (loader ? "accepts it" : "rejects it (" + why + ")") << ", the schema "
                                    << (violation ? "rejects it (" + violation->message + ")" : "accepts it");
    }
  }
  // The fields whose drift this test was written for are among those compared.
  for (const char* p : {"/tuning/fa_decode_unroll", "/tuning/fa_prefill_keys_per_tile", "/tuning/fa_prefill_split_k",
                        "/attention/modifiers/2/slopes/0", "/run/seed", "/attention/head_dim"}) {
    EXPECT_TRUE(pointers.count(p)) << p << " was not compared";
  }
  RecordProperty("compared", static_cast<int>(compared));
}

// A config whose value breaks only the schema (a rule the loader's own checks would miss) is
// rejected under its JSON pointer, naming the value and what the schema accepts.
TEST(SchemaAgreement, ASchemaViolationNamesPointerValueAndAccepted) {
  json doc = everyField();
  doc["tuning"]["fa_prefill_split_k"] = "065";
  const auto v = validateAgainstSchema(doc, schema());
  ASSERT_TRUE(v);
  EXPECT_EQ(v->pointer, "/tuning/fa_prefill_split_k");
  EXPECT_NE(v->message.find("\"065\" (a string)"), std::string::npos) << v->message;
  EXPECT_NE(v->message.find("\"auto\""), std::string::npos) << v->message;
}

}  // namespace
}  // namespace foundry
