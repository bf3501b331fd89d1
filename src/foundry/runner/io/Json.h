#pragma once
// Strict JSON for files people write (configs) and files programs write (safetensors headers): one
// parser that rejects duplicate keys and absurd nesting, reports line:column, and helpers to name
// values and fields in error messages.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "foundry/Error.h"

namespace foundry {

/// Where a byte sits in a text: 1-based line and column (column counts bytes).
struct TextPosition {
  std::size_t line = 1;
  std::size_t column = 1;
};

/// The position of the 0-based byte `offset` in `text`; an offset past the end is the end.
TextPosition textPosition(std::string_view text, std::size_t offset);

/// Parses `text` as exactly one JSON value. Malformed text, a duplicate key or nesting deeper than
/// `maxDepth` is a UserError: malformed text names the line and column (field ""), a duplicate key
/// carries its JSON pointer. Every message ends with " (in <origin>)". Never throws anything else.
nlohmann::json parseJsonStrict(std::string_view text, const std::string& origin, std::size_t maxDepth = 32);

/// `pointer` + "/" + `key`, with `~` and `/` escaped as RFC 6901 requires.
std::string jsonPointerAppend(const std::string& pointer, std::string_view key);

/// A short, printable (ASCII) rendering of a value for messages: `-3`, `"bf16" (a string)`, `an object`.
std::string describeJsonValue(const nlohmann::json& value);

/// quoted(): `text` in double quotes, printable ASCII only, cut after `maxChars` bytes.
std::string quoteForMessage(std::string_view text, std::size_t maxChars = kQuotedChars);

}  // namespace foundry
