#pragma once
// What a snippet of GLSL declares at file scope, read without a compiler: the KernelBuilder checks
// users' code against the library's and against the hook points' contracts before glslang sees it.
// Plain scans rather than std::regex: kernels are built from several threads at once, and libstdc++'s
// regex matcher fills the shared ctype narrow cache lazily (a race ThreadSanitizer reports).
#include <cstddef>
#include <string>
#include <vector>

namespace foundry::glsl_scan {

bool isWordChar(char c);
/// Offsets in `text` where `word` starts and no identifier character comes right before it.
std::vector<std::size_t> wordStarts(const std::string& text, const std::string& word);

/// A function defined (or declared) at file scope. Types are as written, less the qualifiers that do
/// not change what a call passes (`in`, `const`, precision); `out` and `inout` stay.
struct Function {
  std::string name;
  std::string returnType;
  std::vector<std::string> params;
  bool definition = false;  ///< a body follows, not a prototype
  std::size_t line = 0;     ///< 1-based
  std::string text() const;  ///< "float f(float, uint)"
};

/// A name a snippet takes at file scope other than a function's: a constant, a variable, a struct or
/// a macro.
struct Name {
  std::string name;
  std::string kind;  ///< "constant", "variable", "struct", "macro"
  std::size_t line = 0;
};

struct TopLevel {
  std::vector<Function> functions;
  std::vector<Name> names;
};

/// Every branch of `#if` is read, so a snippet's alternatives appear side by side; comments and the
/// bodies of functions and macros are skipped.
TopLevel scanTopLevel(const std::string& text);

/// Whether GLSL passes a value of type `from` where `to` is taken: equal, or an implicit conversion
/// (int to uint, integers to float, any of those to double, per vector size).
bool convertsImplicitly(const std::string& from, const std::string& to);

}  // namespace foundry::glsl_scan
