// Runs a model's attention from its JSON config as `foundry run` does, from C++: the config loaded and
// validated, its run shortened to two layers, prefill and decode with a KV cache per layer, and the
// check against the CPU float64 reference and the materialised path.
// Usage: model_run CONFIG.json
#include <cstdio>

#include <foundry/foundry.h>

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CONFIG.json\n", argv[0]);
    return 2;
  }
  foundry::RunRequest request;
  request.config = foundry::loadModelConfig(argv[1]);
  request.configPath = argv[1];
  request.config.run.layers = 2;
  request.config.run.promptLen = 32;
  request.config.run.decodeTokens = 4;
  request.check = true;

  // The knobs: the environment, then the config's own tuning, as `foundry run` reads them.
  foundry::Options options = foundry::Options::fromEnvironment();
  options.applyTuning(request.config.tuning, "/tuning");
  request.attention = options.attention;
  foundry::Runtime rt(options.runtime);
  const auto progress = foundry::makeProgress(false);
  const foundry::RunReport report = foundry::runModel(rt, request, *progress);
  std::printf("%s\n", report.summary().c_str());
  if (!report.passed()) {
    std::fprintf(stderr, "model_run: %s\n", report.failure().c_str());
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "model_run: %s\n", e.what());
  return 2;
}
