#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "Commands.h"
#include "StandardStreams.h"
#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/FileIdentity.h"
#include "foundry/Runtime.h"
#include "foundry/runner/Communicator.h"
#include "foundry/runner/ContextParallelDecode.h"
#include "foundry/runner/Session.h"
#ifdef FOUNDRY_WITH_MPI
#include "foundry/runner/MpiCommunicator.h"
#endif

namespace foundry::cli {

namespace {

/// The processes mpirun started this one among (Open MPI's variable, or PMI's): 1 when not under mpirun.
std::uint32_t launchedRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name)) return static_cast<std::uint32_t>(std::max(1L, std::strtol(v, nullptr, 10)));
  }
  return 1;
}

/// The ranks of this run: none for a run of one process; MPI's under mpirun with several.
std::unique_ptr<Communicator> runRanks() {
  const std::uint32_t ranks = launchedRanks();
  if (ranks <= 1) return nullptr;
#ifdef FOUNDRY_WITH_MPI
  return std::make_unique<MpiCommunicator>();
#else
  throw UnsupportedError(fmt::format("started by mpirun as one of {} processes, but this foundry was built without "
                                     "Open MPI (libopenmpi-dev); run one process, or rebuild with it", ranks));
#endif
}

}  // namespace

void addRunCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("run", "Run a model config's attention end to end: prefill, then the decode loop");
  struct Args {
    std::string config;
    std::optional<std::int64_t> promptLen, decodeTokens, batch, layers;
    std::optional<std::string> dtype;
    std::optional<std::string> kvDtype;
    std::optional<std::int64_t> pageSize;
    std::optional<std::string> promptLens;
    bool check = false, noCheck = false;
    std::string json, inputs, expect, save, path = "flash";
    double tolerance = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("config", a->config, "A model config (configs/*.json)")->required()->type_name("PATH");
  cmd->add_option("--prompt-len", a->promptLen, "Tokens in the prompt (prefill)");
  cmd->add_option("--decode-tokens", a->decodeTokens, "Tokens decoded after the prompt");
  cmd->add_option("--batch", a->batch, "Sequences in the batch");
  cmd->add_option("--layers", a->layers, "Layers to run (default: the config's run.layers)");
  cmd->add_option("--dtype", a->dtype, "f16, bf16 or f32");
  cmd->add_option("--kv-dtype", a->kvDtype, "KV cache storage, f16, bf16, f32, int8 or q8_0 (default: --dtype)");
  cmd->add_option("--page-size", a->pageSize,
                  "Paged KV caches: rows per page, each sequence's pages through a block table (0: contiguous)");
  cmd->add_option("--prompt-lens", a->promptLens,
                  "One prompt length per sequence, e.g. 100,2000,4096 (sets --batch and --prompt-len unless given)");
  cmd->add_flag("--check", a->check,
                "Compare sampled layers and tokens with the CPU and the materialised path (default: the config's run.check)");
  cmd->add_flag("--no-check", a->noCheck, "Skip the check even where the config's run.check asks for it");
  cmd->add_option("--json", a->json, "Write the report as JSON (atomically)")->type_name("PATH");
  cmd->add_option("--inputs", a->inputs, "Replay q, k, v from a safetensors file ([layers, batch, tokens, heads, D])")
      ->type_name("PATH");
  cmd->add_option("--expect", a->expect, "Compare the outputs with tensor 'o' of a safetensors file")
      ->type_name("PATH");
  cmd->add_option("--save", a->save, "Save the outputs as tensor 'o' of a safetensors file")->type_name("PATH");
  cmd->add_option("--tolerance", a->tolerance, "Relative error allowed by --check and --expect (default per dtype)");
  cmd->add_option("--path", a->path, "flash (default) or reference (the materialised baseline)");
  cmd->callback([&global, &action, a] {
    action = [&global, a] {
      // Before anything is read: no output may replace an input of the run, or another output.
      checkOutputsApart({{"config", a->config}, {"--inputs", a->inputs}, {"--expect", a->expect}},
                        {{"--json", a->json}, {"--save", a->save}});
      RunRequest req;
      req.config = loadModelConfig(a->config, {a->batch, a->promptLen, a->decodeTokens, a->layers, a->dtype, a->kvDtype,
                                               a->pageSize, a->promptLens});
      req.configPath = a->config;
      if (a->path != "flash" && a->path != "reference") {
        throw UserError("--path", fmt::format("'{}'; accepted: flash, reference", printable(a->path)));
      }
      // A relative error of 1 would pass outputs that are all zero: nothing would be checked.
      if (!(a->tolerance >= 0 && a->tolerance < 1)) {
        throw UserError("--tolerance", fmt::format("'{}'; accepted: a relative error from 0 to below 1 (0: the "
                                                   "dtype's bound)", a->tolerance));
      }
      if (a->check && a->noCheck) throw UserError("--no-check", "given with --check; give one of them");
      req.path = a->path == "flash" ? AttentionPath::Flash : AttentionPath::Reference;
      req.check = a->noCheck ? false : (a->check || req.config.run.check);
      req.tolerance = a->tolerance;
      if (!a->inputs.empty()) req.inputs = a->inputs;
      if (!a->expect.empty()) req.expect = a->expect;
      if (!a->save.empty()) req.save = a->save;
      // Knobs: the environment, then the config's tuning, then --set and the other flags.
      Options options = Options::fromEnvironment();
      options.applyTuning(req.config.tuning, "/tuning");
      global.applyTo(options);
      if (!a->json.empty()) checkWritableTarget(a->json, "--json");  // before the run, not after it
      req.attention = options.attention;
      const std::unique_ptr<Communicator> ranks = runRanks();
      req.ranks = ranks.get();
      std::optional<RunReport> ran;
      try {
        Runtime rt(ranks ? optionsForRank(options.runtime, *ranks) : options.runtime);
        const std::unique_ptr<Progress> progress = ranks && ranks->rank() != 0 ? std::make_unique<SilentProgress>()
                                                                               : makeProgress(::isatty(2) != 0);
        ran = runModel(rt, req, *progress);
      } catch (const Error& e) {
        if (!ranks) throw;
        // The other ranks may wait for this one in a collective: end them all, with this error's code.
        std::fflush(stdout);
        printErrorLine(errorKindName(e.kind()), fmt::format("rank {}: {}", ranks->rank(), e.what()));
        ranks->abort(exitCodeFor(e.kind()));
      }
      // Over several ranks, rank 0 reports (it holds every output and ran the check).
      if (ranks && ranks->rank() != 0) return 0;
      const RunReport& report = *ran;
      // Each output is attempted whatever became of the others; each failure is reported.
      printOut(report.summary());
      std::vector<OutputFailure> failures;
      if (report.saveFailure) failures.push_back(*report.saveFailure);
      if (!a->json.empty()) {
        try {
          writeFileAtomically(a->json, report.toJson().dump(2) + "\n");
        } catch (const Error& e) {
          failures.push_back({e.kind(), fmt::format("--json: {}", e.what())});
        }
      }
      for (const auto& f : failures) printErrorLine(errorKindName(f.kind), f.message);
      if (!report.passed()) {
        printErrorLine("check failed", report.failure());
      }
      if (!failures.empty()) return exitCodeFor(failures.front().kind);
      return report.passed() ? 0 : kExitCheckFailed;
    };
  });
}

}  // namespace foundry::cli
