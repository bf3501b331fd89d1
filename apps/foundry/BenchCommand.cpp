#include <unistd.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "BenchSuite.h"
#include "Commands.h"
#include "StandardStreams.h"
#include "Table.h"
#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/runner/Progress.h"

namespace foundry::cli {

namespace {

class SilentProgress : public Progress {
 public:
  void update(const std::string&, std::uint64_t, std::uint64_t) override {}
};

// Three significant digits: lavapipe's read ceiling is under 1 GB/s, an H200's thousands.
std::string orNa(const std::optional<double>& v) { return v ? fmt::format("{:.3g}", *v) : "n/a"; }

// "85% of read"; n/a where the ceiling was not measured (no cooperative matrices).
std::string percentCell(const bench::Result& r) {
  return r.percentOfCeiling ? fmt::format("{:.0f}% of {}", *r.percentOfCeiling, r.ceiling) : "n/a";
}

/// Whether --variants `filters` keep the variant `name`: all do without filters, else those whose
/// names contain one of them.
bool picks(const std::vector<std::string>& filters, const std::string& name) {
  return filters.empty() || std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
           return name.find(f) != std::string::npos;
         });
}

/// Each --variants filter must keep a variant of some shape; else the error lists the words variant
/// names are made of (the names themselves run to thousands).
void checkVariantFilters(const std::vector<std::string>& filters,
                         const std::vector<std::vector<std::pair<std::string, AttentionOptions>>>& variants) {
  for (const std::string& f : filters) {
    const auto picked = [&](const auto& shape) {
      return std::any_of(shape.begin(), shape.end(), [&](const auto& v) { return picks({f}, v.first); });
    };
    if (std::any_of(variants.begin(), variants.end(), picked)) continue;
    std::vector<std::string> words;
    for (const auto& shape : variants) {
      for (const auto& [name, knobs] : shape) {
        for (std::size_t at = 0; at < name.size();) {
          const std::size_t end = std::min(name.find(' ', at), name.size());
          const std::string word = name.substr(at, end - at);
          if (std::find(words.begin(), words.end(), word) == words.end()) words.push_back(word);
          at = end + 1;
        }
      }
    }
    throw UserError("--variants", fmt::format("'{}' is in no variant's name; accepted: parts of the names, which are "
                                              "made of: {}", printable(f), fmt::join(words, ", ")));
  }
}

}  // namespace

void addBenchCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("bench", "Time attention kernels on GPU timestamps (checked against the CPU first)");
  struct Args {
    bench::Options options;
    std::string json;
    std::uint32_t l2Mib = 64;
    std::vector<std::string> shapes;
    bool sweep = false;
    std::vector<std::string> only;
    bool probe = false;
    std::vector<std::string> readScans;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--suite", a->options.suite, "decode, prefill, modifiers, ceilings, all, smoke")->capture_default_str();
  cmd->add_option("--json", a->json, "Write the results as JSON (atomically)")->type_name("PATH");
  cmd->add_option("--runs", a->options.runs, "Timed runs per shape (median reported)")->capture_default_str();
  cmd->add_option("--warmup", a->options.warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--l2-mib", a->l2Mib, "L2 size to defeat: inputs rotate over more than 4x this")->capture_default_str();
  cmd->add_flag("!--wait-each-batch", a->options.queueAhead,
                "Wait for each batch of timed calls before recording the next (the GPU idles in between, and its "
                "clock may drop there); by default the next batch is queued first");
  cmd->add_option("--shape", a->shapes,
                  fmt::format("Time these shapes instead of a suite: decode:B:Hq:Hkv:kv:D, prefill:B:Hq:Hkv:S:D, each "
                              "optionally with {} (one of a kind)", bench::kShapeModifiers));
  cmd->add_flag("--sweep", a->sweep, "Time every variant the knobs can force for each shape (the Selector's defaults come from this)");
  cmd->add_flag("--probe", a->probe,
                "Also run each shape through the probe's build of its kernel (FOUNDRY_FA_PREFILL_PROBE, "
                "FOUNDRY_FA_DECODE_PROBE; the warm-up calls and 10 more back to back, the last one's records): "
                "for prefill workgroups per SM at once, idle SMs and the cycles of each phase; for decode the "
                "times of each workgroup's setup, stream, hand-over and merge");
  cmd->add_option(
      "--read-scan", a->readScans,
      "Also time read streams of these geometries, MIB:GROUPS:WORKGROUP:LOADS[:blocked[:SPLIT:SIDES]|:ring|:cm2] "
      "(LOADS 16-byte loads a lane in flight; blocked: each workgroup reads a contiguous share, as a "
      "decode split does, cut into SPLIT parts, one per group of its invocations, each part's SIDES runs "
      "read side by side by every lane, as a decode subgroup reads K and V; ring: those shares with "
      "each load's slot refilled as soon as it is folded, as the decode kernels' rings of tiles; "
      "cm2: the same shares in workgroup-scope coopmat2 tensor loads of 64 x 128 f16, LOADS at once)");
  cmd->add_option("--variants", a->only, "With --sweep: only the variants whose names contain one of these (and auto)")
      ->needs("--sweep");
  cmd->callback([&global, &action, a] {
    action = [&global, a] {
      if (a->options.runs < 1) throw UserError("--runs", "must be at least 1");
      std::vector<bench::ReadScan> scans;
      for (const auto& s : a->readScans) scans.push_back(bench::parseReadScan(s));
      std::vector<bench::Shape> shapes;
      for (const auto& s : a->shapes) shapes.push_back(bench::parseShape(s));
      if (shapes.empty()) shapes = bench::shapesFor(a->options.suite);
      a->options.l2Bytes = std::uint64_t(a->l2Mib) << 20;
      if (!a->json.empty()) checkWritableTarget(a->json, "--json");  // before the timings, not after them
      const foundry::Options options = global.resolve();
      a->options.knobs = options.attention;
      Runtime rt(options.runtime);
      bench::Runner runner(rt, a->options);
      // Off a terminal each result's line on stdout is the progress.
      const std::unique_ptr<Progress> progress =
          ::isatty(2) != 0 ? makeProgress(true) : std::unique_ptr<Progress>(std::make_unique<SilentProgress>());
      // The variants each shape sweeps; every --variants filter must pick one of them.
      std::vector<std::vector<std::pair<std::string, AttentionOptions>>> variants;
      for (const auto& s : a->sweep ? shapes : std::vector<bench::Shape>{}) {
        variants.push_back(bench::sweepVariants(s, options.attention, rt.info()));
      }
      checkVariantFilters(a->only, variants);
      const bench::Ceilings ceilings = runner.measureCeilings();
      fmt::print("device: {} ({})\n", rt.info().name, rt.info().driverName);
      fmt::print("ceilings: read {} GB/s, cooperative-matrix f16->f32 {} TFLOP/s; an empty dispatch {:.1f} us, "
                 "two with a barrier between {:.1f} us\n",
                 orNa(ceilings.readGBs), orNa(ceilings.mmaTflops), ceilings.emptyDispatchUs,
                 ceilings.dependentPairUs);
      nlohmann::json out;
      for (const auto& scan : scans) {
        const double us = runner.readScan(scan);
        fmt::print("read scan {}: {:.1f} us, {:.0f} GB/s\n", scan.name(), us, double(scan.mib << 20) / us / 1e3);
        out["read_scans"].push_back({{"scan", scan.name()}, {"us", us}});
      }
      out["device"] = rt.info().name;
      out["driver"] = rt.info().driverName;
      out["ceilings"] = bench::toJson(ceilings);
      out["results"] = nlohmann::json::array();
      Table t({"shape", "us", "TFLOP/s", "K/V GB/s", "of ceiling", "check", "kernels"});
      bool allChecked = true;
      auto report = [&](const bench::Result& r) {
        allChecked &= r.checked;
        std::string kernels;
        for (const auto& k : r.kernels) kernels += (kernels.empty() ? "" : " + ") + k;
        std::string name = r.shape.name();
        if (!r.variant.empty()) name += " [" + r.variant + "]";
        t.row({name, fmt::format("{:.1f}", r.medianUs), fmt::format("{:.1f}", r.tflops),
               fmt::format("{:.0f}", r.kvGBs), percentCell(r),
               r.checked ? fmt::format("ok {:.1e}", r.relError) : fmt::format("FAIL {:.1e}", r.relError), kernels});
        out["results"].push_back(bench::toJson(r));
        progress->finish();
        fmt::print("{}: {:.1f} us\n", name, r.medianUs);
        if (r.probe) fmt::print("  probe: {}\n", r.probe->describe());
        if (r.decodeProbe) fmt::print("  probe: {}\n", r.decodeProbe->describe());
        std::fflush(stdout);
      };
      // Timed, and with --probe a prefill shape also through the probe's build.
      auto measured = [&](bench::Prepared& prepared, const AttentionOptions& knobs) {
        bench::Result r = runner.measure(prepared, knobs, ceilings);
        if (a->probe && prepared.shape.kind == "prefill") r.probe = runner.probe(prepared, knobs);
        if (a->probe && prepared.shape.kind == "decode") r.decodeProbe = runner.probeDecode(prepared, knobs);
        return r;
      };
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const bench::Shape& s = shapes[i];
        if (!a->sweep) {
          progress->update("bench", i, shapes.size());
          bench::Prepared prepared = runner.prepare(s);
          report(measured(prepared, options.attention));
          continue;
        }
        bench::Prepared prepared = runner.prepare(s);
        std::vector<std::pair<std::string, AttentionOptions>> wanted;
        for (const auto& variant : variants[i]) {
          if (variant.first == "auto" || picks(a->only, variant.first)) wanted.push_back(variant);
        }
        const std::string phase = fmt::format("sweep {}/{}", i + 1, shapes.size());
        for (std::size_t v = 0; v < wanted.size(); ++v) {
          progress->update(phase, v, wanted.size());
          try {
            bench::Result r = measured(prepared, wanted[v].second);
            r.variant = wanted[v].first;
            report(r);
          } catch (const UserError& e) {
            progress->finish();
            fmt::print("{} [{}]: skipped: {}\n", s.name(), wanted[v].first, e.what());
          }
        }
      }
      progress->finish();
      fmt::print("{}", t.str());
      if (std::any_of(out["results"].begin(), out["results"].end(), [](const nlohmann::json& r) {
            return r["pct_ceiling"].is_number() && r["pct_ceiling"].get<double>() > 100;
          })) {
        fmt::print("of ceiling: decode is relative to the read ceiling (a cold stream through a buffer far larger than "
                   "the caches), prefill to the cooperative-matrix rate; over 100% means the data came from a cache "
                   "faster than that stream.\n");
      }
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
