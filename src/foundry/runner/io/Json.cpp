#include "foundry/runner/io/Json.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "foundry/Error.h"

namespace foundry {

namespace {

using json = nlohmann::json;

std::string withOrigin(const std::string& message, const std::string& origin) {
  return origin.empty() ? message : fmt::format("{} (in {})", message, origin);
}

// Thrown from inside the parser callback; turned into a UserError once the parser has unwound.
struct StrictJsonViolation {
  std::string pointer;
  std::string message;
};

// The parser callback sees a flat stream of events; this keeps enough of the path to name a
// duplicate key by its JSON pointer.
class PathTracker {
 public:
  explicit PathTracker(std::size_t maxDepth) : maxDepth_(maxDepth) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (frames_.size() >= maxDepth_) {
          throw StrictJsonViolation{pointer(), fmt::format("JSON nested deeper than {} levels", maxDepth_)};
        }
        frames_.push_back(Frame{event == json::parse_event_t::array_start, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        Frame& top = frames_.back();
        const auto& key = parsed.get_ref<const std::string&>();
        if (!top.keys.insert(key).second) {
          top.lastKey = key;
          throw StrictJsonViolation{pointer(), fmt::format("duplicate key {}", quoteForMessage(key))};
        }
        top.lastKey = key;
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        elementDone();
        break;
      case json::parse_event_t::value:
        elementDone();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array = false;
    std::set<std::string> keys;
    std::string lastKey;
    std::size_t count = 0;  // elements completed, for arrays
  };

  void elementDone() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().count;
  }

  std::string pointer() const {
    std::string out;
    for (const auto& f : frames_) {
      out = f.array ? out + "/" + std::to_string(f.count) : jsonPointerAppend(out, f.lastKey);
    }
    return out;
  }

  std::size_t maxDepth_;
  std::vector<Frame> frames_;
};

// nlohmann's message is "[json.exception.parse_error.101] parse error at line 1, column 2: syntax
// error ..."; keep the part after the position, which we compute ourselves from the byte offset.
std::string parseErrorDetail(const std::string& what) {
  const auto at = what.find("parse error");
  const auto colon = what.find(": ", at == std::string::npos ? 0 : at);
  return printable(colon == std::string::npos ? what : what.substr(colon + 2), std::string::npos);
}

std::string stripNlohmannPrefix(const std::string& what) {
  const auto close = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && close != std::string::npos ? what.substr(close + 2) : what;
}

}  // namespace

TextPosition textPosition(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  TextPosition pos;
  std::size_t lineStart = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      lineStart = i + 1;
    }
  }
  pos.column = offset - lineStart + 1;
  return pos;
}

json parseJsonStrict(std::string_view text, const std::string& origin, std::size_t maxDepth) {
  // nlohmann stops at a NUL byte as if the text ended there; JSON allows none anywhere.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    const TextPosition pos = textPosition(text, nul);
    throw UserError("", withOrigin(fmt::format("malformed JSON at line {}, column {}: a NUL byte", pos.line,
                                               pos.column),
                                   origin));
  }
  try {
    PathTracker tracker(maxDepth);
    return json::parse(text.begin(), text.end(), std::ref(tracker));
  } catch (const StrictJsonViolation& v) {
    throw UserError(v.pointer, withOrigin(v.message, origin));
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based index of the last character read; 0 when unknown.
    const TextPosition pos = textPosition(text, e.byte == 0 ? 0 : e.byte - 1);
    throw UserError("", withOrigin(fmt::format("malformed JSON at line {}, column {}: {}", pos.line, pos.column,
                                               parseErrorDetail(e.what())),
                                   origin));
  } catch (const json::exception& e) {
    // e.g. out_of_range 406 for a number such as 1e400.
    throw UserError("", withOrigin(fmt::format("malformed JSON: {}", parseErrorDetail(stripNlohmannPrefix(e.what()))),
                                   origin));
  }
}

std::string jsonPointerAppend(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string quoteForMessage(std::string_view text, std::size_t maxChars) { return quoted(text, maxChars); }

std::string describeJsonValue(const json& value) {
  switch (value.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return value.empty() ? "an empty array" : "an array";
    case json::value_t::string: return quoteForMessage(value.get_ref<const std::string&>()) + " (a string)";
    case json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case json::value_t::null: return "null";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return value.dump();
    default: return "a binary value";
  }
}

}  // namespace foundry
