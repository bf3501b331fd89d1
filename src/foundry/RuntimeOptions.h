#pragma once
// Every knob Foundry reads, parsed once: environment first, then a config's `tuning` object, then CLI
// flags. Nothing else in Foundry reads the environment.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace foundry {

/// How decode partial results across subgroups are kept in shared memory.
enum class PartialStorage { Float, Half };
std::string_view partialStorageName(PartialStorage storage);

/// A tri-state forcing switch: let the selector decide, force on, or force off.
enum class Force { Auto, On, Off };

struct RuntimeOptions {
  // Attention path.
  bool disableFa = false;                          ///< FOUNDRY_DISABLE_FA
  bool sdpaForceMaterialized = false;              ///< FOUNDRY_SDPA_FORCE_MATERIALIZED
  bool debugSdpa = false;                          ///< FOUNDRY_DEBUG_SDPA
  bool debugSdpaVerbose = false;                   ///< FOUNDRY_DEBUG_SDPA_VERBOSE
  bool sdpaDebugOnlineCompare = false;             ///< FOUNDRY_SDPA_DEBUG_ONLINE_COMPARE
  std::optional<std::uint32_t> faPrefillWarps;     ///< FOUNDRY_FA_PREFILL_WARPS
  std::optional<std::uint32_t> faPrefillSplitK;    ///< FOUNDRY_FA_PREFILL_SPLIT_K
  bool disableFaPrefillSplitK = false;             ///< FOUNDRY_DISABLE_FA_PREFILL_SPLITK
  Force faPrefillCoopMat = Force::Auto;            ///< FOUNDRY_FA_PREFILL_COOPMAT
  Force faPrefillRegisterSoftmax = Force::Auto;    ///< FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX
  std::optional<std::uint32_t> faPrefillKeysPerTile;///< FOUNDRY_FA_PREFILL_KEYS_PER_TILE
  Force faPrefillHeadsFirst = Force::Auto;         ///< FOUNDRY_FA_PREFILL_HEADS_FIRST
  std::optional<std::uint32_t> faDecodeWarps;      ///< FOUNDRY_FA_DECODE_WARPS
  std::optional<std::uint32_t> faDecodeKeysPerWarp;///< FOUNDRY_FA_DECODE_KEYS_PER_WARP
  bool faDecodeScalar = false;                     ///< FOUNDRY_FA_DECODE_SCALAR
  std::optional<PartialStorage> faDecodeTgOut;     ///< FOUNDRY_FA_DECODE_TG_OUT
  std::optional<std::uint32_t> faDecodeVectorWidth;///< FOUNDRY_FA_DECODE_VEC
  std::optional<std::uint32_t> faDecodeUnroll;     ///< FOUNDRY_FA_DECODE_UNROLL
  std::optional<std::uint32_t> faDecodeSplitK;     ///< FOUNDRY_FA_DECODE_SPLIT_K
  Force faDecodeFusedReduce = Force::Auto;         ///< FOUNDRY_FA_DECODE_FUSED_REDUCE
  // Runtime.
  std::string device;        ///< FOUNDRY_DEVICE: index or name substring; empty picks a discrete GPU first
  std::string cacheDir;      ///< FOUNDRY_CACHE_DIR: empty means $XDG_CACHE_HOME/foundry; "off" disables
  std::string dumpKernels;   ///< FOUNDRY_DUMP_KERNELS: a directory, or empty
  std::string kernelDir;     ///< FOUNDRY_KERNEL_DIR: read kernels/*.glsl from here instead of the binary
  std::string logLevel = "warn";  ///< FOUNDRY_LOG_LEVEL
  bool validation = false;   ///< FOUNDRY_VALIDATION: enable the Khronos validation layer
  /// Filled from the environment for the default cache location; not a knob.
  std::string homeDir, xdgCacheHome;
  /// Where each knob set so far got its value: "environment", the JSON pointer "/tuning/<key>", or the
  /// flag ("--set", "--device"). A knob not listed has its default.
  std::map<std::string, std::string> sources;

  /// Reads the process environment. The only place Foundry calls getenv.
  static RuntimeOptions fromEnvironment();
  /// Parses a given environment (tests pass a map). Unknown FOUNDRY_* variables are an error.
  static RuntimeOptions fromEnvironment(const std::map<std::string, std::string>& env);

  /// Sets one knob by its variable name (FOUNDRY_...). `source` names where the value came from.
  void set(std::string_view name, std::string_view value, std::string_view source);
  /// Applies a config's `tuning` object; keys are knob names without FOUNDRY_, in lower case.
  /// Errors carry the JSON pointer `pointer`/key.
  void applyTuning(const nlohmann::json& tuning, const std::string& pointer);
  /// Every knob and its current value, for logging and reports.
  std::vector<std::pair<std::string, std::string>> describe() const;
  /// Where `knob` (FOUNDRY_...) got its value: an entry of `sources`, or "default".
  std::string sourceOf(std::string_view knob) const;
  /// The field an error about `knob`'s value names: the config's JSON pointer when the value came from
  /// its `tuning`, else the knob's name.
  std::string fieldOf(std::string_view knob) const;
};

/// One documented knob.
struct KnobInfo {
  std::string_view name;      ///< FOUNDRY_...
  std::string_view accepted;  ///< the accepted values, as shown in errors and docs
  std::string_view help;
};
const std::vector<KnobInfo>& knobTable();

}  // namespace foundry
