#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/BenchSuite.h"
#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/cli/Commands.h"
#include "foundry/cli/Table.h"

namespace foundry::cli {

void addBenchCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("bench", "Time attention kernels on GPU timestamps (checked against the CPU first)");
  struct Args {
    bench::Options options;
    std::string json;
    std::uint32_t l2Mib = 64;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--suite", a->options.suite, "decode, prefill, ceilings, all, smoke")->capture_default_str();
  cmd->add_option("--json", a->json, "Write the results as JSON (atomically)");
  cmd->add_option("--runs", a->options.runs, "Timed runs per shape (median reported)")->capture_default_str();
  cmd->add_option("--warmup", a->options.warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--l2-mib", a->l2Mib, "L2 size to defeat: inputs rotate over more than 4x this")->capture_default_str();
  cmd->callback([&global, &action, a] {
    action = [&global, a] {
      if (a->options.runs < 1) throw UserError("--runs", "must be at least 1");
      a->options.l2Bytes = std::uint64_t(a->l2Mib) << 20;
      Runtime rt(global.resolve());
      bench::Runner runner(rt, a->options);
      const auto shapes = bench::shapesFor(a->options.suite);
      const bench::Ceilings ceilings = runner.measureCeilings();
      fmt::print("device: {} ({})\n", rt.info().name(), rt.device().caps().driverName);
      fmt::print("ceilings: read {:.0f} GB/s, cooperative-matrix f16->f32 {:.0f} TFLOP/s\n", ceilings.readGBs,
                 ceilings.mmaTflops);
      nlohmann::json out;
      out["device"] = rt.info().name();
      out["driver"] = rt.device().caps().driverName;
      out["ceilings"] = bench::toJson(ceilings);
      out["results"] = nlohmann::json::array();
      Table t({"shape", "us", "TFLOP/s", "K/V GB/s", "% ceiling", "check", "kernels"});
      bool allChecked = true;
      for (const auto& s : shapes) {
        const bench::Result r = runner.run(s, ceilings);
        allChecked &= r.checked;
        std::string kernels;
        for (const auto& k : r.kernels) kernels += (kernels.empty() ? "" : " + ") + k;
        t.row({s.name(), fmt::format("{:.1f}", r.medianUs), fmt::format("{:.1f}", r.tflops),
               fmt::format("{:.0f}", r.kvGBs), fmt::format("{:.0f}%", r.percentOfCeiling),
               r.checked ? fmt::format("ok {:.1e}", r.relError) : fmt::format("FAIL {:.1e}", r.relError), kernels});
        out["results"].push_back(bench::toJson(r));
        fmt::print("{}: {:.1f} us\n", s.name(), r.medianUs);
        std::fflush(stdout);
      }
      fmt::print("{}", t.str());
      if (!a->json.empty()) writeFileAtomically(a->json, out.dump(2) + "\n");
      if (!allChecked) {
        fmt::print(stderr, "foundry: a benchmarked output did not match the reference\n");
        return kExitCheckFailed;
      }
      return 0;
    };
  });
}

}  // namespace foundry::cli
