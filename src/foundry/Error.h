#pragma once
// The four kinds of error Foundry raises. Each names the field or value at fault and what is accepted.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace foundry {

/// How much of a user's text (a key, a value, a name) a message quotes before cutting it.
inline constexpr std::size_t kQuotedChars = 80;

/// Text a user gave, made safe for a one-line message on a terminal: every byte outside printable
/// ASCII is escaped (`\n`, `\t`, `\x00`), and text longer than `maxChars` bytes is cut there and ends
/// with "... (N bytes)". Every message that quotes a config's, a flag's or the environment's text uses
/// this (directly, through quoted(), or through UserError's field).
std::string printable(std::string_view text, std::size_t maxChars = kQuotedChars);
/// printable() in double quotes, with `"` and `\` escaped as in JSON: `"n_head"`.
std::string quoted(std::string_view text, std::size_t maxChars = kQuotedChars);

enum class ErrorKind { User, Unsupported, Device, Internal };

/// Base of every error Foundry throws; `kind()` decides the CLI exit code.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/// Bad config, shape, flag or knob. `field` is a JSON pointer, a knob name or a parameter name; it
/// can hold a user's key, so it is kept as printable() shows it.
class UserError : public Error {
 public:
  UserError(const std::string& field, const std::string& message)
      : Error(ErrorKind::User, field.empty() ? message : printable(field) + ": " + message),
        field_(printable(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// A valid request this build or device cannot serve.
class UnsupportedError : public Error {
 public:
  explicit UnsupportedError(const std::string& message) : Error(ErrorKind::Unsupported, message) {}
};

/// Vulkan, shaderc, memory or file-system failure at run time.
class DeviceError : public Error {
 public:
  explicit DeviceError(const std::string& message) : Error(ErrorKind::Device, message) {}
};

/// A broken invariant inside Foundry: a bug.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(ErrorKind::Internal, message) {}
};

const char* errorKindName(ErrorKind kind);

/// Exit code of the CLI for each error kind. 0 is success, 1 a failed check (a numerical mismatch).
int exitCodeFor(ErrorKind kind);
inline constexpr int kExitCheckFailed = 1;

}  // namespace foundry

#define FOUNDRY_CHECK_INTERNAL(cond, ...)                                                   \
  do {                                                                                     \
    if (!(cond))                                                                           \
      throw ::foundry::InternalError(fmt::format("{}:{}: {}", __FILE__, __LINE__,          \
                                                 fmt::format(__VA_ARGS__)));               \
  } while (0)
