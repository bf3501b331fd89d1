// The Markdown table of the error suite, as docs/reliability.md holds it.
#include <fmt/format.h>

#include "errors/ErrorRows.h"

namespace foundry::errors {

namespace {

const char* kindForExit(int code) {
  switch (code) {
    case 0:
      return "runs";
    case kExitCheckFailed:
      return "check failed";
    case 2:
      return errorKindName(ErrorKind::User);
    case 3:
      return errorKindName(ErrorKind::Unsupported);
    case 4:
      return errorKindName(ErrorKind::Device);
    default:
      return errorKindName(ErrorKind::Internal);
  }
}

// A Markdown table cell: "{tmp}" shown as $TMP, control characters escaped, pipes escaped.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : printable(substituteTmp(text, "$TMP"), std::string::npos)) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

std::string quoted(const std::string& arg) {
  return !arg.empty() && arg.find_first_of(" ;'\"") == std::string::npos ? arg : fmt::format("'{}'", arg);
}

/// The shell's spelling of where a stream goes: " >&-", " 2> /dev/full", ...
std::string redirection(const test::StreamTarget& target, const char* fd) {
  switch (target.kind) {
    case test::StreamTarget::Kind::Captured:
      return "";
    case test::StreamTarget::Kind::Closed:
      return fmt::format(" {}>&-", fd);
    case test::StreamTarget::Kind::File:
      return fmt::format(" {}> {}", fd, quoted(target.file.string()));
    case test::StreamTarget::Kind::PipeWithoutReader:
      return fmt::format(" {}| (a pipe whose reader has exited)", fd);
  }
  return "";
}

std::string command(const CliRow& r) {
  std::string out;
  for (const auto& [name, value] : r.env) {
    if (value) out += fmt::format("{}={} ", name, quoted(*value));
  }
  if (r.fileSizeLimit) out += fmt::format("prlimit --fsize={} ", *r.fileSizeLimit);
  out += "foundry";
  for (const auto& a : r.args) out += fmt::format(" {}", quoted(a));
  out += redirection(r.stdoutTo, "") + redirection(r.stderrTo, "2");
  return fmt::format("`{}`", cell(out));
}

std::string outcome(const std::string& kind, const std::string& fragment, const std::string& note) {
  if (fragment.empty()) return note.empty() ? kind : fmt::format("{}; {}", kind, cell(note));
  std::string out = fmt::format("{}: `{}`", kind, cell(fragment));
  if (!note.empty()) out += "; " + cell(note);
  return out;
}

}  // namespace

std::string markdownTable() {
  std::string out = "| area | input | how | outcome | exit |\n|---|---|---|---|---|\n";
  for (const auto& r : allCliRows()) {
    const std::string kind = r.exitCode != 0 ? kindForExit(r.exitCode)
                             : r.quiet       ? "runs"
                             : r.logs        ? "runs, logs"
                                             : "runs, warns";
    // With stderr out of reach the quoted text is what stdout still holds.
    const bool stderrSeen = r.stderrTo.kind == test::StreamTarget::Kind::Captured;
    const std::string shown = stderrSeen || r.fragment.empty() ? outcome(kind, r.fragment, r.note)
                                                               : outcome(kind + ", stdout has", r.fragment, r.note);
    out += fmt::format("| {} | {} | {} | {} | {} |\n", r.area, cell(r.input), command(r), shown, r.exitCode);
  }
  for (const auto& r : inProcessRows()) {
    std::string how = fmt::format("`{}`", r.via);
    if (!r.cliPending.empty()) how += fmt::format(" ({})", r.cliPending);
    std::string kind = errorKindName(r.kind);
    if (r.field && !r.field->empty()) kind += fmt::format(" at `{}`", cell(*r.field));
    out += fmt::format("| {} | {} | {} | {} | {} |\n", r.area, cell(r.input), how, outcome(kind, r.fragment, r.note),
                       exitCodeFor(r.kind));
  }
  return out;
}

}  // namespace foundry::errors
