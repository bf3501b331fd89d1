// libFuzzer target: the safetensors reader on arbitrary bytes, as `foundry run` uses it — the header
// read and checked whole, then only the tensors a run reads (q, k, v, o) read lazily. A file is
// either accepted, and then every entry lies within the data with as many bytes as its dtype and
// shape need, and every tensor read decodes to that many floats; or rejected with a UserError /
// UnsupportedError. Anything else is a finding. scripts/fuzz.sh runs it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "Require.h"
#include "foundry/Error.h"
#include "foundry/runner/io/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace foundry;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const SafetensorsReader reader = SafetensorsReader::fromMemory(file, "fuzz.safetensors");
    std::size_t declared = 0;
    for (const auto& [name, e] : reader.entries()) {
      require(!name.empty());
      require(e.begin <= e.end && e.end <= size);
      declared += e.end - e.begin;
    }
    require(declared <= size);
    for (const char* used : {"q", "k", "v", "o"}) {
      if (!reader.entries().contains(used)) continue;
      const SafetensorsTensor t = reader.read(used);
      require(t.bytes.size() == static_cast<std::size_t>(t.numel()) * dtypeBytes(t.dtype));
      require(t.floats().size() == static_cast<std::size_t>(t.numel()));
    }
  } catch (const UserError&) {
  } catch (const UnsupportedError&) {
  }
  return 0;
}
