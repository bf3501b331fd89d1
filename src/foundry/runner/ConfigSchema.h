#pragma once
// configs/schema.json, compiled into the binary, and validation of a config document against it. The
// schema states every field's type, range and enum; the loader (ModelConfig.cpp) reads the fields and
// adds the rules between fields that a schema cannot state.
#include <optional>
#include <string>

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

/// The first (deepest) violation of `schema` by `doc`, or nullopt when `doc` is valid.
std::optional<SchemaViolation> validateAgainstSchema(const nlohmann::json& doc, const nlohmann::json& schema);

}  // namespace foundry
