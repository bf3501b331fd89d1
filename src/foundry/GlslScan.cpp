#include "foundry/GlslScan.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace foundry::glsl_scan {

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<std::size_t> wordStarts(const std::string& text, const std::string& word) {
  std::vector<std::size_t> out;
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    if (at == 0 || !isWordChar(text[at - 1])) out.push_back(at);
  }
  return out;
}

std::string Function::text() const { return fmt::format("{} {}({})", returnType, name, fmt::join(params, ", ")); }

namespace {

struct Token {
  std::string text;
  std::size_t line;
};

bool isIdentifier(const std::string& t) {
  return !t.empty() && (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_');
}

// Tokens outside comments and preprocessor lines; the names `#define` takes go to `macros`.
std::vector<Token> tokenize(const std::string& s, std::vector<Name>& macros) {
  std::vector<Token> out;
  std::size_t i = 0, line = 1;
  bool lineStart = true;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      ++line, ++i, lineStart = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (s.compare(i, 2, "/*") == 0) {
      const std::size_t end = s.find("*/", i + 2);
      const std::size_t stop = end == std::string::npos ? s.size() : end + 2;
      line += static_cast<std::size_t>(std::count(s.begin() + static_cast<std::ptrdiff_t>(i),
                                                  s.begin() + static_cast<std::ptrdiff_t>(stop), '\n'));
      i = stop;
      continue;
    }
    if (c == '#' && lineStart) {  // a directive, with its continued lines
      const std::size_t at = line;
      std::string directive;
      while (i < s.size() && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n') {
          ++line, i += 2;
          continue;
        }
        directive += s[i++];
      }
      std::size_t p = 1;
      while (p < directive.size() && std::isspace(static_cast<unsigned char>(directive[p]))) ++p;
      if (directive.compare(p, 6, "define") == 0) {
        p += 6;
        while (p < directive.size() && std::isspace(static_cast<unsigned char>(directive[p]))) ++p;
        std::size_t e = p;
        while (e < directive.size() && isWordChar(directive[e])) ++e;
        if (e > p) macros.push_back({directive.substr(p, e - p), "macro", at});
      }
      continue;
    }
    lineStart = false;
    std::size_t e = i + 1;
    if (isWordChar(c) || c == '.') {
      while (e < s.size() && (isWordChar(s[e]) || (std::isdigit(static_cast<unsigned char>(c)) && s[e] == '.'))) ++e;
    }
    out.push_back({s.substr(i, e - i), line});
    i = e;
  }
  return out;
}

const std::set<std::string>& passQualifiers() {
  static const std::set<std::string> words = {"in",       "const",    "highp",    "mediump",  "lowp",
                                              "precise",  "restrict", "coherent", "volatile", "readonly",
                                              "writeonly"};
  return words;
}

// `statement` ends with a parenthesised group after a name after a type: a function's head.
bool readFunction(const std::vector<Token>& st, Function& f) {
  if (st.size() < 4 || st.back().text != ")") return false;
  std::size_t open = st.size() - 1;
  int depth = 0;
  for (std::size_t i = st.size(); i-- > 0;) {
    if (st[i].text == ")") ++depth;
    if (st[i].text == "(" && --depth == 0) {
      open = i;
      break;
    }
  }
  if (depth != 0 || open < 2 || !isIdentifier(st[open - 1].text) || !isIdentifier(st[open - 2].text)) return false;
  f.name = st[open - 1].text;
  f.returnType = st[open - 2].text;
  f.line = st[open - 1].line;
  std::vector<std::vector<std::string>> params(1);
  depth = 0;
  for (std::size_t i = open + 1; i + 1 < st.size(); ++i) {
    const std::string& t = st[i].text;
    if (t == "(" || t == "[") ++depth;
    if (t == ")" || t == "]") --depth;
    if (t == "," && depth == 0) {
      params.emplace_back();
    } else {
      params.back().push_back(t);
    }
  }
  for (auto& p : params) {
    std::vector<std::string> kept;
    for (const auto& t : p) {
      if (!passQualifiers().count(t)) kept.push_back(t);
    }
    if (kept.empty() || (kept.size() == 1 && kept[0] == "void" && params.size() == 1)) continue;
    std::string type = kept[0];
    std::size_t next = 1;
    if ((type == "out" || type == "inout") && kept.size() > 1) type += " " + kept[next++];
    for (std::size_t i = next; i < kept.size(); ++i) {
      if (kept[i] == "[") type += "[";
      if (kept[i] == "]") type += "]";
    }
    f.params.push_back(type);
  }
  return true;
}

// A declaration's name: the last identifier before its initialiser and array sizes.
bool readName(const std::vector<Token>& st, Name& n) {
  std::size_t end = st.size();
  int depth = 0;
  for (std::size_t i = 0; i < st.size(); ++i) {
    if (st[i].text == "(" ) ++depth;
    if (st[i].text == ")") --depth;
    if (depth == 0 && st[i].text == "=") {
      end = i;
      break;
    }
  }
  while (end > 0 && st[end - 1].text == "]") {
    while (end > 0 && st[end - 1].text != "[") --end;
    if (end > 0) --end;
  }
  if (end < 2 || !isIdentifier(st[end - 1].text)) return false;
  static const std::set<std::string> skipped = {"precision", "layout", "struct"};
  if (skipped.count(st[0].text)) return false;
  n.name = st[end - 1].text;
  n.line = st[end - 1].line;
  n.kind = std::any_of(st.begin(), st.end(), [](const Token& t) { return t.text == "const"; }) ? "constant" : "variable";
  return true;
}

struct Arith {
  char kind = 0;  ///< b i u f d
  int size = 0;
};

Arith arith(const std::string& t) {
  static const std::pair<const char*, char> scalars[] = {{"bool", 'b'}, {"int", 'i'}, {"uint", 'u'}, {"float", 'f'}, {"double", 'd'}};
  for (const auto& [name, kind] : scalars) {
    if (t == name) return {kind, 1};
  }
  static const std::pair<const char*, char> vectors[] = {{"bvec", 'b'}, {"ivec", 'i'}, {"uvec", 'u'}, {"dvec", 'd'}, {"vec", 'f'}};
  for (const auto& [prefix, kind] : vectors) {
    const std::string p = prefix;
    if (t.size() == p.size() + 1 && t.compare(0, p.size(), p) == 0 && t.back() >= '2' && t.back() <= '4') {
      return {kind, t.back() - '0'};
    }
  }
  return {};
}

}  // namespace

TopLevel scanTopLevel(const std::string& text) {
  TopLevel out;
  const std::vector<Token> tokens = tokenize(text, out.names);
  std::vector<Token> statement;
  int depth = 0;
  for (const Token& t : tokens) {
    if (depth > 0) {
      if (t.text == "{") ++depth;
      if (t.text == "}") --depth;
      continue;
    }
    if (t.text == "{") {
      Function f;
      if (readFunction(statement, f)) {
        f.definition = true;
        out.functions.push_back(std::move(f));
      } else {
        for (std::size_t i = 0; i + 1 < statement.size(); ++i) {
          if (statement[i].text == "struct" && isIdentifier(statement[i + 1].text)) {
            out.names.push_back({statement[i + 1].text, "struct", statement[i + 1].line});
          }
        }
      }
      statement.clear();
      depth = 1;
    } else if (t.text == ";") {
      Function f;
      Name n;
      if (readFunction(statement, f)) {
        out.functions.push_back(std::move(f));
      } else if (readName(statement, n)) {
        out.names.push_back(std::move(n));
      }
      statement.clear();
    } else if (t.text != "}") {
      statement.push_back(t);
    }
  }
  return out;
}

bool convertsImplicitly(const std::string& from, const std::string& to) {
  if (from == to) return true;
  const Arith a = arith(from), b = arith(to);
  if (!a.kind || !b.kind || a.size != b.size) return false;
  switch (b.kind) {
    case 'u': return a.kind == 'i';
    case 'f': return a.kind == 'i' || a.kind == 'u';
    case 'd': return a.kind == 'i' || a.kind == 'u' || a.kind == 'f';
    default: return false;
  }
}

}  // namespace foundry::glsl_scan
