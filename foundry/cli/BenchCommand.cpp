#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/BenchSuite.h"
#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/cli/Commands.h"
#include "foundry/cli/StandardStreams.h"
#include "foundry/cli/Table.h"

namespace foundry::cli {

void addBenchCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("bench", "Time attention kernels on GPU timestamps (checked against the CPU first)");
  struct Args {
    bench::Options options;
    std::string json;
    std::uint32_t l2Mib = 64;
    std::vector<std::string> shapes;
    bool sweep = false;
    std::vector<std::string> only;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--suite", a->options.suite, "decode, prefill, modifiers, ceilings, all, smoke")->capture_default_str();
  cmd->add_option("--json", a->json, "Write the results as JSON (atomically)");
  cmd->add_option("--runs", a->options.runs, "Timed runs per shape (median reported)")->capture_default_str();
  cmd->add_option("--warmup", a->options.warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--l2-mib", a->l2Mib, "L2 size to defeat: inputs rotate over more than 4x this")->capture_default_str();
  cmd->add_option("--shape", a->shapes, "Time these shapes instead of a suite: decode:B:Hq:Hkv:kv:D, prefill:B:Hq:Hkv:S:D, each optionally with +window<W>, +softcap<C>, +alibi, +sinks");
  cmd->add_flag("--sweep", a->sweep, "Time every variant the knobs can force for each shape (the Selector's defaults come from this)");
  cmd->add_option("--variants", a->only, "With --sweep: only the variants whose names contain one of these (and auto)")
      ->needs("--sweep");
  cmd->callback([&global, &action, a] {
    action = [&global, a] {
      if (a->options.runs < 1) throw UserError("--runs", "must be at least 1");
      a->options.l2Bytes = std::uint64_t(a->l2Mib) << 20;
      if (!a->json.empty()) checkWritableTarget(a->json, "--json");  // before the timings, not after them
      Runtime rt(global.resolve());
      bench::Runner runner(rt, a->options);
      std::vector<bench::Shape> shapes;
      for (const auto& s : a->shapes) shapes.push_back(bench::parseShape(s));
      if (shapes.empty()) shapes = bench::shapesFor(a->options.suite);
      const bench::Ceilings ceilings = runner.measureCeilings();
      fmt::print("device: {} ({})\n", rt.info().name, rt.info().driverName);
      fmt::print("ceilings: read {:.0f} GB/s, cooperative-matrix f16->f32 {:.0f} TFLOP/s; an empty dispatch {:.1f} us, "
                 "two with a barrier between {:.1f} us\n",
                 ceilings.readGBs, ceilings.mmaTflops, ceilings.emptyDispatchUs, ceilings.dependentPairUs);
      nlohmann::json out;
      out["device"] = rt.info().name;
      out["driver"] = rt.info().driverName;
      out["ceilings"] = bench::toJson(ceilings);
      out["results"] = nlohmann::json::array();
      Table t({"shape", "us", "TFLOP/s", "K/V GB/s", "% ceiling", "check", "kernels"});
      bool allChecked = true;
      auto report = [&](const bench::Result& r) {
        allChecked &= r.checked;
        std::string kernels;
        for (const auto& k : r.kernels) kernels += (kernels.empty() ? "" : " + ") + k;
        std::string name = r.shape.name();
        if (!r.variant.empty()) name += " [" + r.variant + "]";
        t.row({name, fmt::format("{:.1f}", r.medianUs), fmt::format("{:.1f}", r.tflops),
               fmt::format("{:.0f}", r.kvGBs), fmt::format("{:.0f}%", r.percentOfCeiling),
               r.checked ? fmt::format("ok {:.1e}", r.relError) : fmt::format("FAIL {:.1e}", r.relError), kernels});
        out["results"].push_back(bench::toJson(r));
        fmt::print("{}: {:.1f} us\n", name, r.medianUs);
        std::fflush(stdout);
      };
      for (const auto& s : shapes) {
        if (!a->sweep) {
          report(runner.run(s, ceilings));
          continue;
        }
        bench::Prepared prepared = runner.prepare(s);
        for (const auto& [variant, knobs] : bench::sweepVariants(s, rt.options(), rt.info())) {
          const std::string& name = variant;  // a structured binding cannot be captured (C++20 before clang 16)
          const bool wanted = a->only.empty() || name == "auto" ||
                              std::any_of(a->only.begin(), a->only.end(),
                                          [&](const std::string& o) { return name.find(o) != std::string::npos; });
          if (!wanted) continue;
          try {
            bench::Result r = runner.measure(prepared, knobs, ceilings);
            r.variant = variant;
            report(r);
          } catch (const UserError& e) {
            fmt::print("{} [{}]: skipped: {}\n", s.name(), variant, e.what());
          }
        }
      }
      fmt::print("{}", t.str());
      if (!a->json.empty()) writeFileAtomically(a->json, out.dump(2) + "\n");
      if (!allChecked) {
        printErrorLine("check failed", "a benchmarked output did not match the reference");
        return kExitCheckFailed;
      }
      return 0;
    };
  });
}

}  // namespace foundry::cli
