#pragma once
// configs/schema.json, compiled into the binary, and validation of a config document against it. The
// schema states every field's type, range and enum; the loader (ModelConfig.cpp) reads the fields with
// the ranges it looks up here and adds the rules between fields that a schema cannot state.
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace foundry {

/// The config schema as parsed JSON.
const nlohmann::json& configSchema();

/// Where a document breaks a schema: the JSON pointer of the value and one line naming the value and
/// what the schema accepts there.
struct SchemaViolation {
  std::string pointer;
  std::string message;
};

/// What configs/schema.json accepts for the value at `pointer` of `doc` (at a oneOf, the branch the
/// document's "type" selects). The loader takes its ranges, lengths and enums from here, so the schema
/// is their one source.
struct SchemaRange {
  double minimum = -std::numeric_limits<double>::infinity();
  bool exclusiveMinimum = false;
  double maximum = std::numeric_limits<double>::infinity();
  std::size_t minLength = 0;  ///< of a string, or items of an array
  std::size_t maxLength = std::numeric_limits<std::size_t>::max();
  std::vector<std::string> enumStrings;  ///< the string members of an enum, in schema order
};
SchemaRange schemaRangeAt(const nlohmann::json& doc, const std::string& pointer);

/// The first (deepest) violation of `schema` by `doc`, or nullopt when `doc` is valid.
std::optional<SchemaViolation> validateAgainstSchema(const nlohmann::json& doc, const nlohmann::json& schema);

}  // namespace foundry
