#pragma once
// The four kinds of error Foundry raises. Each names the field or value at fault and what is accepted.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace foundry {

enum class ErrorKind { User, Unsupported, Device, Internal };

/// Base of every error Foundry throws; `kind()` decides the CLI exit code.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/// Bad config, shape, flag or knob. `field` is a JSON pointer, a knob name or a parameter name.
class UserError : public Error {
 public:
  UserError(std::string field, const std::string& message)
      : Error(ErrorKind::User, field.empty() ? message : field + ": " + message), field_(std::move(field)) {}
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
