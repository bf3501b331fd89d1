#include "foundry/Error.h"

namespace foundry {

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
