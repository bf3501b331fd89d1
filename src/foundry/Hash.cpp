#include "foundry/Hash.h"

#include <fmt/format.h>

namespace foundry {

// The FNV-128 prime is 2^88 + 0x13B, so multiplying by it is a shift and a small multiply.
void Hasher::mix(unsigned char byte) {
  lo_ ^= byte;
  const std::uint64_t p0 = (lo_ & 0xffffffffull) * 0x13Bull;
  const std::uint64_t p1 = (lo_ >> 32) * 0x13Bull;
  const std::uint64_t carry = (p1 + (p0 >> 32)) >> 32;
  const std::uint64_t hi = hi_ * 0x13Bull + carry + (lo_ << 24);
  lo_ = lo_ * 0x13Bull;
  hi_ = hi;
}

Hasher& Hasher::add(std::string_view bytes) {
  for (unsigned char c : bytes) mix(c);
  return *this;
}

Hasher& Hasher::add(std::span<const std::byte> bytes) {
  return add(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Hasher& Hasher::field(std::string_view bytes) {
  add(fmt::format("{}:", bytes.size()));
  return add(bytes);
}

std::string Hasher::hex() const {
  return fmt::format("{:016x}{:016x}", hi_, lo_);
}

std::string hashHex(std::string_view bytes) { return Hasher().add(bytes).hex(); }

}  // namespace foundry
