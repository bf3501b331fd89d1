#include "foundry/Error.h"

#include <algorithm>

namespace foundry {

namespace {

void appendEscaped(std::string& out, unsigned char c) {
  switch (c) {
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default: out += fmt::format("\\x{:02x}", c);
  }
}

std::string escapedAndCut(std::string_view text, std::size_t maxChars, bool quoting) {
  std::string out;
  const std::size_t shown = std::min(text.size(), maxChars);
  for (const unsigned char c : text.substr(0, shown)) {
    if (quoting && (c == '"' || c == '\\')) out += {'\\', static_cast<char>(c)};
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else appendEscaped(out, c);
  }
  if (shown < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

}  // namespace

std::string printable(std::string_view text, std::size_t maxChars) { return escapedAndCut(text, maxChars, false); }

std::string quoted(std::string_view text, std::size_t maxChars) {
  return '"' + escapedAndCut(text, maxChars, true) + '"';
}

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::User: return "user error";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::Device: return "device error";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

int exitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::User: return 2;
    case ErrorKind::Unsupported: return 3;
    case ErrorKind::Device: return 4;
    case ErrorKind::Internal: return 5;
  }
  return 5;
}

}  // namespace foundry
