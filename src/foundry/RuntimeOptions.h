#pragma once
// The runtime's knobs: which device, where the caches live, kernel dumps, the snippet directory, logging
// and validation. The attention steps' knobs are AttentionOptions (foundry/steps/AttentionOptions.h);
// Options (foundry/steps/Options.h) reads both, once: environment first, then a config's `tuning`
// object, then CLI flags.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foundry/Knobs.h"

namespace foundry {

struct RuntimeOptions {
  std::string device;        ///< FOUNDRY_DEVICE: index or name substring; empty picks a discrete GPU first
  std::string cacheDir;      ///< FOUNDRY_CACHE_DIR: empty means $XDG_CACHE_HOME/foundry; "off" disables
  std::string dumpKernels;   ///< FOUNDRY_DUMP_KERNELS: a directory, or empty
  std::string kernelDir;     ///< FOUNDRY_KERNEL_DIR: read kernels/*.glsl from here instead of the binary
  std::string glslc;         ///< FOUNDRY_GLSLC: a glslc for cooperative-matrix-2 kernels, or empty
  std::string logLevel = "warn";  ///< FOUNDRY_LOG_LEVEL
  bool validation = false;   ///< FOUNDRY_VALIDATION: enable the Khronos validation layer
  /// Filled from the environment for the default cache location; not a knob.
  std::string homeDir, xdgCacheHome;
  /// Where each of these knobs got its value.
  KnobSources sources;

  /// The runtime's knobs.
  static const std::vector<Knob<RuntimeOptions>>& knobs();
  /// Every one of these knobs and its current value.
  std::vector<std::pair<std::string, std::string>> describe() const { return knob::describe(knobs(), *this); }
  /// UserError naming the knob of any field set outside its accepted values (knob::validate).
  void validate() const { knob::validate(knobs(), *this); }
  std::string sourceOf(std::string_view knob) const { return sources.sourceOf(knob); }
  std::string fieldOf(std::string_view knob) const { return sources.fieldOf(knob); }
  /// The glslc the coopmat2 kernels go to: FOUNDRY_GLSLC where it was given (empty: none), else, for a
  /// device with VK_NV_cooperative_matrix2, `glslc` as PATH finds it (Debian 13's compiles them; Debian
  /// 12's does not, which its probe finds). Only such a device looks on PATH: the probe runs it once.
  std::string glslcCommand(bool deviceHasCoopMat2) const {
    return deviceHasCoopMat2 && sourceOf("FOUNDRY_GLSLC") == "default" ? "glslc" : glslc;
  }
};

}  // namespace foundry
