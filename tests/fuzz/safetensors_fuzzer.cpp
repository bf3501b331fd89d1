// libFuzzer target: the safetensors reader on arbitrary bytes. A file is either read, and then every
// tensor's bytes match its dtype and shape and decode to that many floats, or rejected with a
// UserError / UnsupportedError; anything else is a finding. scripts/fuzz.sh runs it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "foundry/Error.h"
#include "foundry/io/Safetensors.h"
#include "tests/fuzz/Require.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace foundry;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const SafetensorsFile f = parseSafetensors(file, "fuzz.safetensors");
    std::size_t bytes = 0;
    for (const auto& [name, t] : f.tensors) {
      require(!name.empty());
      require(t.bytes.size() == static_cast<std::size_t>(t.numel()) * dtypeBytes(t.dtype));
      require(t.floats().size() == static_cast<std::size_t>(t.numel()));
      bytes += t.bytes.size();
    }
    require(bytes <= size);
  } catch (const UserError&) {
  } catch (const UnsupportedError&) {
  }
  return 0;
}
