#pragma once
// What the error rows share: writing and reading the files they hand to Foundry, the base config
// they damage, hand-made safetensors bytes, and the check that a failed command left nothing behind.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "errors/ErrorRows.h"

namespace foundry::errors {

/// Writes `bytes` to `p`, creating its directory.
void writeBytes(const std::filesystem::path& p, const std::string& bytes);
/// The whole file, or "" if it cannot be read.
std::string readText(const std::filesystem::path& p);

/// A valid Llama-3-like config (32 layers, 32/8 heads, head_dim 128) that rows change one field of.
nlohmann::json baseConfig();

/// A safetensors file: the header's length (8 bytes, little-endian), the header, `dataBytes` zero bytes.
std::string safetensors(const std::string& header, std::size_t dataBytes);
/// A header holding one tensor "a" with the given dtype, shape and offsets (JSON text).
std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets);
/// The 8 little-endian bytes of `v`.
std::string le64(std::uint64_t v);

// ---- TinyLlama (configs/tinyllama-1.1b.json, 32 query heads, 4 KV heads, head_dim 64), cut down: the
// rows that must run before they fail.

inline const std::string kTiny = "{tmp}/tinyllama.json";
/// One prompt token, two decode tokens, one layer: outputs [1 layer, 1 batch, 3 tokens, heads, 64].
inline const std::vector<std::string> kSmall = {"--prompt-len", "1", "--decode-tokens", "2", "--layers", "1"};
/// Sixteen prompt tokens (a real prefill, one more kernel to compile), two decode tokens, one layer.
inline const std::vector<std::string> kWithPrefill = {"--prompt-len", "16", "--decode-tokens", "2", "--layers", "1"};
/// q and k/v of a kSmall run as --inputs holds them: [layers, batch, tokens, heads, head_dim].
inline const std::vector<std::int64_t> kQShape = {1, 1, 3, 32, 64}, kKvShape = {1, 1, 3, 4, 64};

/// `foundry run {tmp}/tinyllama.json` with `sizes` and then `extra`.
std::vector<std::string> runTiny(std::vector<std::string> extra, const std::vector<std::string>& sizes = kSmall);
/// Copies the TinyLlama config to {tmp}/tinyllama.json, so that the table's commands show {tmp} only.
void copyTiny(const CliContext& ctx);
/// F16 tensors with these names and shapes (a small ramp of values), as --inputs or --expect files hold them.
void writeTensors(const std::filesystem::path& p,
                  const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors);

/// The first line of `text` holding `needle`, or "".
std::string lineWith(const std::string& text, const std::string& needle);

/// The kernel cache at {tmp}/cache, and the command that fills it with every lavapipe kernel.
extern const std::map<std::string, std::optional<std::string>> kCacheEnv;
extern const std::vector<std::string> kCompile;
/// Fills {tmp}/cache with every lavapipe kernel; returns the first SPIR-V entry (by name).
std::filesystem::path firstCacheEntry(const CliContext& ctx);
/// A check for a `kCompile` run: it compiled `compiled` kernels and read the rest from disk, and a
/// further run compiles `again` (0: what it rebuilt is valid now).
std::function<std::string(const CliContext&, const CliOutcome&)> compiledThenAgain(int compiled, int again);

/// Every file and directory under `dir`, relative, sorted; the row's cache directory (.cache) left out.
std::vector<std::string> entriesUnder(const std::filesystem::path& dir);
/// A check: the row's directory holds exactly `expected` afterwards (nothing half-written appeared).
std::function<std::string(const CliContext&, const CliOutcome&)> leavesOnly(std::vector<std::string> expected);

}  // namespace foundry::errors
