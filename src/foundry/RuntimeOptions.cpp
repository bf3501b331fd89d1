#include "foundry/RuntimeOptions.h"

#include <algorithm>

namespace foundry {

const std::vector<Knob<RuntimeOptions>>& RuntimeOptions::knobs() {
  using O = RuntimeOptions;
  static const std::vector<Knob<O>> table = {
      knob::text<&O::device, O>("FOUNDRY_DEVICE", "a device index or a name substring", "which Vulkan device to use"),
      knob::text<&O::cacheDir, O>("FOUNDRY_CACHE_DIR", "a directory, or off",
                                  "SPIR-V and pipeline cache location (default $XDG_CACHE_HOME/foundry)"),
      knob::text<&O::dumpKernels, O>("FOUNDRY_DUMP_KERNELS", "a directory",
                                     "write each built kernel's .comp and .json there"),
      knob::text<&O::kernelDir, O>("FOUNDRY_KERNEL_DIR", "a copy of kernels/ (the directory holding common/, flashattention/, ...)",
                                   "read GLSL snippets from disk instead of the binary"),
      knob::text<&O::glslc, O>("FOUNDRY_GLSLC", "a glslc command (a path), or empty",
                               "a glslc that compiles GL_NV_cooperative_matrix2 kernels (and, glslang 15.3 or newer, "
                               "their bf16 operands), run for those alone; unset: glslc on PATH, where the device has "
                               "the extension; empty: none (bash scripts/newer-compilers.sh makes one from Debian's "
                               "forky packages)",
                               true),
      {{"FOUNDRY_LOG_LEVEL", "trace, debug, info, warn, error, off", "log verbosity"},
       [](O& o, const std::string& v, const std::string& f) {
         static const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "off"};
         if (std::find(levels.begin(), levels.end(), v) == levels.end()) {
           knob::reject(f, v, "trace, debug, info, warn, error, off");
         }
         o.logLevel = v;
       },
       [](const O& o) { return o.logLevel; }},
      knob::boolean<&O::validation, O>("FOUNDRY_VALIDATION",
                                       "enable VK_LAYER_KHRONOS_validation with synchronization checks"),
  };
  return table;
}

}  // namespace foundry
