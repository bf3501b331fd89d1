#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "Commands.h"
#include "Table.h"
#include "foundry/Error.h"
#include "foundry/FileIdentity.h"
#include "foundry/KernelCache.h"
#include "foundry/Runtime.h"
#include "foundry/ShaderCompiler.h"
#include "foundry/vk/PipelineCache.h"
#include <fmt/ranges.h>
#include "foundry/runner/LayerModifiers.h"
#include "foundry/runner/ModelConfig.h"
#include "foundry/steps/KernelCatalog.h"

namespace foundry::cli {

void addKernelsCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("kernels", "Build every kernel an attention layout needs; list, dump or compile them");
  struct Args {
    std::string dump;
    std::string pretend;
    bool compile = false;
    bool stats = false;
    AttentionLayout layout;
    // Wide and signed, so that whatever was typed is checked against the config's ranges.
    std::int64_t heads = AttentionLayout{}.nHeads, kvHeads = AttentionLayout{}.nKvHeads;
    std::int64_t headDim = AttentionLayout{}.headDim;
    std::optional<std::string> dtype, kvDtype;
    std::optional<std::int64_t> pageSize;
    std::string config;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--dump", a->dump, "Write each kernel's .comp and .json into this directory")->type_name("DIR");
  cmd->add_option("--pretend", a->pretend,
                  "Plan for a device instead of opening one: a preset (h200, lavapipe, ...) with key=value "
                  "overrides, or the `pretend` string `foundry devices` prints");
  cmd->add_flag("--compile", a->compile, "Also compile each kernel with shaderc, through the disk cache (FOUNDRY_CACHE_DIR)");
  cmd->add_flag("--stats", a->stats, "Create each pipeline on the device and print what the driver reports about it");
  auto* config = cmd->add_option("--config", a->config,
                                 "A model config (configs/*.json): its heads, head_dim, RoPE, context, dtype and tuning")
                     ->type_name("PATH");
  for (auto* layoutFlag : {cmd->add_option("--heads", a->heads, "Query heads")->capture_default_str(),
                           cmd->add_option("--kv-heads", a->kvHeads, "KV heads")->capture_default_str(),
                           cmd->add_option("--head-dim", a->headDim, "Head dimension")->capture_default_str()}) {
    layoutFlag->excludes(config);
  }
  // As `foundry run` takes them, with or without --config.
  cmd->add_option("--dtype", a->dtype, "f16, bf16 or f32 (default: the config's, else f16)");
  cmd->add_option("--kv-dtype", a->kvDtype, "KV cache storage, f16, bf16, f32, int8 or q8_0 (default: --dtype)");
  cmd->add_option("--page-size", a->pageSize, "Paged KV caches: rows per page (0: contiguous)");
  cmd->callback([&global, &action, a] {
    action = [&global, a] {
      checkOutputsApart({{"--config", a->config}}, {{"--dump", a->dump}});
      Options options = Options::fromEnvironment();
      if (!a->config.empty()) {
        // The kernels a run of this config builds: its layout, and its tuning under --set.
        const ModelConfig c =
            loadModelConfig(a->config, {.dtype = a->dtype, .kvDtype = a->kvDtype, .pageSize = a->pageSize});
        a->layout = attentionLayoutOf(c);
        options.applyTuning(c.tuning, "/tuning");
      } else {
        const LayoutFlags f = checkLayoutFlags(a->heads, a->kvHeads, a->headDim, a->dtype, a->kvDtype, a->pageSize);
        a->layout.nHeads = f.heads.heads;
        a->layout.nKvHeads = f.heads.kvHeads;
        a->layout.headDim = f.heads.headDim;
        a->layout.dtype = f.dtype;
        a->layout.cacheType = f.cacheType;
        a->layout.pageSize = f.pageSize;
      }
      global.applyTo(options);
      configureLogging(options.runtime);
      std::optional<DeviceInfo> pretend;
      std::unique_ptr<Runtime> runtime;
      if (!a->pretend.empty()) {
        if (a->stats) throw UserError("--stats", "needs a real device; drop --pretend");
        pretend = parseDevicePreset(a->pretend);
      } else {
        runtime = std::make_unique<Runtime>(options.runtime);
      }
      const DeviceInfo& device = pretend ? *pretend : runtime->info();
      const auto kernels = attentionKernels(a->layout, device, SnippetLibrary::select(options.runtime.kernelDir), options.attention);
      // Compiling goes through the same caches a run uses, so `--compile` also fills the disk cache.
      KernelCache* cache = runtime ? &runtime->kernels() : nullptr;
      std::unique_ptr<KernelCache> ownCache;
      if (!cache && a->compile) {
        ownCache = std::make_unique<KernelCache>(
            std::make_shared<ShaderCompiler>(ShaderCompiler::Optimization::Performance,
                                             options.runtime.glslcCommand(device.coopMat2)),
            std::make_shared<DiskCache>(diskCacheDirectory(options.runtime)));
        cache = ownCache.get();
      }
      Table t({"role", "kernel", "workgroup", "shared", "push", a->compile ? "SPIR-V words" : "",
               a->stats ? "driver statistics" : ""});
      for (const auto& [role, k] : kernels) {
        if (!a->dump.empty()) dumpKernel(a->dump, k);
        const std::string words = a->compile ? std::to_string(cache->spirv(k)->size()) : "";
        std::string stats;
        if (a->stats) {
          for (const auto& [name, value] : runtime->pipelines().get(k)->statistics()) {
            stats += fmt::format("{}{}={}", stats.empty() ? "" : "; ", name, value);
          }
          if (stats.empty()) stats = "(the driver reports none)";
        }
        t.row({role, k.name, std::to_string(k.layout.workgroup[0]), fmt::format("{} B", k.layout.sharedBytes),
               fmt::format("{} B", k.layout.pushBytes), words, stats});
      }
      fmt::print("{}", t.str());
      if (!a->dump.empty()) fmt::print("wrote {} kernels to {}\n", kernels.size(), a->dump);
      if (a->compile || a->stats) {
        const DiskCache& disk = runtime ? runtime->diskCache() : *ownCache->disk();
        fmt::print("kernel cache: {} compiled, {} from disk, {} from memory; disk cache {}\n", cache->compiles(),
                   cache->diskHits(), cache->memoryHits(), disk.enabled() ? disk.directory().string() : "off");
      }
      return 0;
    };
  });
}

}  // namespace foundry::cli
