// libFuzzer target: the model-config loader on arbitrary bytes. A config is either loaded, and then
// obeys the rules the loader promises, or rejected with a UserError / UnsupportedError; anything else
// (another exception, a crash, a sanitizer report, a hang) is a finding. scripts/fuzz.sh runs it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "Require.h"
#include "foundry/Error.h"
#include "foundry/runner/ConfigSchema.h"
#include "foundry/runner/ModelConfig.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace foundry;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto maximum = [](const char* field) { return schemaRangeAt(nlohmann::json::object(), field).maximum; };
  try {
    const ModelConfig c = parseModelConfig(text, "fuzz.json");
    require(c.layers >= 1 && c.layers <= maximum("/attention/layers"));
    require(c.nKvHeads >= 1 && c.nHeads % c.nKvHeads == 0);
    require(c.run.layers >= 1 && c.run.layers <= c.layers);
    require(c.totalTokens() <= c.maxContext && c.maxContext <= maximum("/attention/max_context"));
    require(c.run.dtype == DType::F16 || c.run.dtype == DType::BF16 || c.run.dtype == DType::F32);
    // Re-applying the config's own run as command-line overrides must be accepted unchanged.
    RunOverrides same;
    same.batch = c.run.batch;
    same.promptLen = c.run.promptLen;
    same.decodeTokens = c.run.decodeTokens;
    same.layers = c.run.layers;
    same.dtype = std::string(dtypeName(c.run.dtype));
    if (c.run.kvDtype) same.kvDtype = std::string(dtypeName(*c.run.kvDtype));
    const ModelConfig again = applyOverrides(c, same);
    require(again.run.promptLen == c.run.promptLen && again.run.layers == c.run.layers);
  } catch (const UserError&) {
  } catch (const UnsupportedError&) {
  }
  return 0;
}
