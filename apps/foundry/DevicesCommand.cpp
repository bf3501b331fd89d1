#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "Commands.h"
#include "Table.h"
#include "foundry/Error.h"
#include "foundry/ExternalGlslc.h"
#include "foundry/Runtime.h"
#include "foundry/vk/Instance.h"

namespace foundry::cli {

namespace {

std::string coopMatText(const DeviceInfo& c) {
  if (c.coopMatShapes.empty()) return "-";
  std::vector<std::string> shapes;
  for (const auto& s : c.coopMatShapes) {
    if (s.accumulator == DType::F32) shapes.push_back(fmt::format("{}x{}x{}", s.m, s.n, s.k));
  }
  return fmt::format("{}", fmt::join(shapes, " "));
}

std::string mib(std::uint64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

/// The device as a Runtime sees it: where it has cooperative matrices, the accumulator layout comes from
/// a probe kernel, so the pretend string plans what a run on it would.
DeviceInfo runtimeInfo(const PhysicalDeviceEntry& d, RuntimeOptions options) {
  if (d.info.coopMatShapes.empty()) return d.info;
  options.device = std::to_string(d.index);
  try {
    return Runtime(options).info();
  } catch (const Error& e) {
    spdlog::warn("device {}: the cooperative-matrix layout is unknown ({})", d.index, e.what());
    return d.info;
  }
}

}  // namespace

void addDevicesCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto* cmd = app.add_subcommand("devices", "List Vulkan devices and their capabilities");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([&global, &action, json] {
    action = [&global, json] {
      const RuntimeOptions options = global.resolve().runtime;
      configureLogging(options);
      VulkanInstance instance(options.validation);
      std::vector<DeviceInfo> infos;
      for (const auto& d : instance.devices()) infos.push_back(runtimeInfo(d, options));
      if (*json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& d : instance.devices()) {
          const auto& c = infos[d.index];
          out.push_back({{"index", d.index},
                         {"name", c.name},
                         {"type", deviceKindName(c.kind)},
                         {"vendor", vendorName(c.vendor)},
                         {"family", deviceFamilyName(c.family)},
                         {"driver", c.driverName},
                         {"subgroup_size", c.subgroupSize},
                         {"shared_memory_bytes", c.maxSharedMemoryBytes},
                         {"max_storage_buffer_bytes", c.maxStorageBufferRange},
                         {"fp16", c.fp16Arithmetic},
                         {"storage_16bit", c.storage16Bit},
                         {"shader_clock", c.shaderClock},
                         {"sm_builtins", c.smBuiltins},
                         {"cooperative_matrix",  // null, not the table's "-"
                          c.coopMatShapes.empty() ? nlohmann::json() : nlohmann::json(coopMatText(c))},
                         {"cooperative_matrix2", c.coopMat2},
                         {"cooperative_matrix2_bf16", c.coopMat2Bf16},
                         {"compute_units", c.computeUnits},
                         {"memory_bytes", c.deviceMemoryBytes},
                         {"pretend", c.toString()}});
        }
        fmt::print("{}\n", out.dump(2));
        return 0;
      }
      Table t({"#", "name", "type", "family", "driver", "subgroup", "shared", "max buffer", "fp16",
               "coopmat (f32 acc)", "CUs", "memory"});
      for (const auto& d : instance.devices()) {
        const auto& c = infos[d.index];
        t.row({std::to_string(d.index), c.name, std::string(deviceKindName(c.kind)),
               std::string(deviceFamilyName(c.family)), c.driverName,
               fmt::format("{}{}", c.subgroupSize,
                           c.minSubgroupSize != c.maxSubgroupSize
                               ? fmt::format(" ({}..{})", c.minSubgroupSize, c.maxSubgroupSize)
                               : ""),
               fmt::format("{} KiB", c.maxSharedMemoryBytes / 1024), mib(c.maxStorageBufferRange),
               c.fp16Arithmetic ? "yes" : "no", coopMatText(c), std::to_string(c.computeUnits),
               mib(c.deviceMemoryBytes)});
      }
      fmt::print("{}", t.str());
      // coopmat2 kernels need a compiler Debian 12's shaderc is not: the one a device with the extension takes.
      const std::string command = options.glslcCommand(true);
      const bool fromPath = options.sourceOf("FOUNDRY_GLSLC") == "default";
      const std::optional<ExternalGlslc> glslc =
          command.empty() ? std::nullopt : std::optional<ExternalGlslc>(std::in_place, command);
      if (!glslc || (fromPath && glslc->version().empty())) {
        fmt::print("coopmat2 compiler: none ({}; bash scripts/newer-compilers.sh makes one)\n",
                   fromPath ? "FOUNDRY_GLSLC is unset and PATH has no glslc" : "FOUNDRY_GLSLC is empty");
      } else {
        const std::string can = !glslc->coopMat2() ? ": " + glslc->problem()
                                : glslc->bf16()     ? std::string(", bf16 operands too")
                                                    : "; " + glslc->bf16Problem();
        fmt::print("coopmat2 compiler: {}{} ({}){}\n", command, fromPath ? " on PATH (FOUNDRY_GLSLC unset)" : "",
                   glslc->version().empty() ? "?" : glslc->version(), can);
      }
      // What `foundry kernels --pretend` takes to plan for this device elsewhere.
      for (const auto& d : instance.devices()) fmt::print("#{} pretend: {}\n", d.index, infos[d.index].toString());
      return 0;
    };
  });
}

}  // namespace foundry::cli
