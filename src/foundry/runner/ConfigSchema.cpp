#include "foundry/runner/ConfigSchema.h"

#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundry/Error.h"
#include "foundry/runner/io/Json.h"

namespace foundry {

extern const std::string_view kConfigSchemaText;

namespace {

using json = nlohmann::json;

const json& resolve(const json& node, const json& root) {
  if (!node.is_object() || !node.contains("$ref")) return node;
  const std::string ref = node.at("$ref").get<std::string>();  // "#/$defs/switch"
  return root.at(json::json_pointer(ref.substr(1)));
}

std::string describeBound(const json& node) {
  std::string out;
  if (node.contains("minimum")) out += fmt::format(" of at least {}", node.at("minimum").dump());
  if (node.contains("exclusiveMinimum")) out += fmt::format(" greater than {}", node.at("exclusiveMinimum").dump());
  if (node.contains("maximum")) out += fmt::format("{} at most {}", out.empty() ? "" : " and", node.at("maximum").dump());
  if (node.contains("multipleOf")) out += fmt::format(", a multiple of {}", node.at("multipleOf").dump());
  return out;
}

// What a schema node accepts, in words: enums and consts listed, ranges given.
std::string describeAccepted(const json& schemaNode, const json& root) {
  const json& node = resolve(schemaNode, root);
  if (node.contains("enum")) {
    std::string out;
    for (const auto& v : node.at("enum")) out += (out.empty() ? "" : ", ") + v.dump();
    return "one of " + out;
  }
  if (node.contains("const")) return node.at("const").dump();
  for (const char* any : {"anyOf", "oneOf"}) {
    if (!node.contains(any)) continue;
    std::string out;
    for (const auto& branch : node.at(any)) out += (out.empty() ? "" : "; or ") + describeAccepted(branch, root);
    return out;
  }
  const std::string type = node.value("type", std::string("a value"));
  const std::string article = type == "integer" || type == "object" || type == "array" ? "an " : "a ";
  std::string out = article + type + describeBound(node);
  if (node.contains("pattern")) out += fmt::format(" matching {}", node.at("pattern").dump());
  if (node.contains("maxLength")) out += fmt::format(" of at most {} characters", node.at("maxLength").dump());
  return out;
}

// The schema node that describes the value at `pointer` of `doc`: through properties, items and
// references; at oneOf/anyOf the branch whose "type" const matches the document's.
const json& schemaNodeAt(const json& doc, const json::json_pointer& pointer, const json& root) {
  std::vector<std::string> segments;
  for (json::json_pointer p = pointer; !p.empty(); p.pop_back()) segments.insert(segments.begin(), p.back());
  const json* node = &resolve(root, root);
  const json* value = &doc;
  json::json_pointer at;
  for (const auto& segment : segments) {
    node = &resolve(*node, root);
    for (const char* any : {"oneOf", "anyOf"}) {
      if (!node->contains(any)) continue;
      for (const auto& branch : node->at(any)) {
        const json& b = resolve(branch, root);
        const bool typeMatches = !b.contains("properties") || !b.at("properties").contains("type") ||
                                 !b.at("properties").at("type").contains("const") ||
                                 (value->is_object() && value->value("type", json()) == b.at("properties").at("type").at("const"));
        const bool holds = (b.contains("properties") && b.at("properties").contains(segment)) ||
                           (b.contains("items") && value->is_array());
        if (typeMatches && holds) {
          node = &b;
          break;
        }
      }
    }
    if (node->contains("properties") && node->at("properties").contains(segment)) {
      node = &node->at("properties").at(segment);
    } else if (node->contains("items") && value->is_array()) {
      node = &node->at("items");
    } else {
      break;
    }
    at.push_back(segment);
    value = doc.contains(at) ? &doc.at(at) : value;
  }
  return *node;
}

json::json_pointer pointerOf(const std::vector<std::string>& context) {
  json::json_pointer p;
  for (const auto& part : context) {
    if (part.size() >= 2 && part.front() == '[' && part.back() == ']') p.push_back(part.substr(1, part.size() - 2));
  }
  return p;
}

// valijson reads integers as signed 64-bit, so one above INT64_MAX would turn negative. Clamped to
// INT64_MAX it still exceeds every maximum in the schema exactly as the value itself does.
json clampUnsigned(const json& value) {
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) return INT64_MAX;
  if (!value.is_structured()) return value;
  json out = value;
  for (auto& item : out.items()) item.value() = clampUnsigned(item.value());
  return out;
}

}  // namespace

const json& configSchema() {
  static const json schema = json::parse(kConfigSchemaText);
  return schema;
}

SchemaRange schemaRangeAt(const json& doc, const std::string& pointer) {
  const json& root = configSchema();
  const json& node = resolve(schemaNodeAt(doc, json::json_pointer(pointer), root), root);
  SchemaRange range;
  if (node.contains("minimum")) range.minimum = node.at("minimum").get<double>();
  if (node.contains("exclusiveMinimum")) {
    range.minimum = node.at("exclusiveMinimum").get<double>();
    range.exclusiveMinimum = true;
  }
  if (node.contains("maximum")) range.maximum = node.at("maximum").get<double>();
  if (node.contains("minLength")) range.minLength = node.at("minLength").get<std::size_t>();
  if (node.contains("maxLength")) range.maxLength = node.at("maxLength").get<std::size_t>();
  if (node.contains("minItems")) range.minLength = node.at("minItems").get<std::size_t>();
  if (node.contains("maxItems")) range.maxLength = node.at("maxItems").get<std::size_t>();
  if (node.contains("enum")) {
    for (const auto& v : node.at("enum")) {
      if (v.is_string()) range.enumStrings.push_back(v.get<std::string>());
    }
  }
  return range;
}

std::optional<SchemaViolation> validateAgainstSchema(const json& original, const json& schema) {
  const json doc = clampUnsigned(original);
  valijson::Schema compiled;
  valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
  const valijson::adapters::NlohmannJsonAdapter schemaAdapter(schema);
  parser.populateSchema(schemaAdapter, compiled);
  valijson::Validator validator;
  valijson::ValidationResults results;
  const valijson::adapters::NlohmannJsonAdapter docAdapter(doc);
  if (validator.validate(compiled, docAdapter, &results)) return std::nullopt;
  // The deepest error names the value itself; the shallower ones only say a child failed.
  valijson::ValidationResults::Error error, deepest;
  while (results.popError(error)) {
    if (error.context.size() > deepest.context.size()) deepest = error;
  }
  const json::json_pointer pointer = pointerOf(deepest.context);
  const json& value = original.contains(pointer) ? original.at(pointer) : original;
  const json& node = schemaNodeAt(doc, pointer, schema);
  std::string description = deepest.description;
  if (!description.empty() && description.back() == '.') description.pop_back();
  return SchemaViolation{pointer.to_string(),
                         fmt::format("{}: expected {}, found {} (configs/schema.json)", description,
                                     describeAccepted(node, schema), describeJsonValue(value))};
}

}  // namespace foundry
