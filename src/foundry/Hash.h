#pragma once
// FNV-1a with 128-bit state: cache keys and file checksums (not a cryptographic hash).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace foundry {

class Hasher {
 public:
  Hasher& add(std::string_view bytes);
  Hasher& add(std::span<const std::byte> bytes);
  /// Adds a length-prefixed field so ("ab","c") and ("a","bc") differ.
  Hasher& field(std::string_view bytes);
  std::string hex() const;  ///< 32 hex digits

 private:
  void mix(unsigned char byte);

  std::uint64_t hi_ = 0x6c62272e07bb0142ull;  // the FNV-1a 128-bit offset basis
  std::uint64_t lo_ = 0x62b821756295c58dull;
};

std::string hashHex(std::string_view bytes);

}  // namespace foundry
