#pragma once
// A model's attention layout and one run of it, read from a JSON file in configs/ (schema:
// configs/schema.json). Plain data: it says what to run, never how (STYLE 1). Every field is checked
// when the file is read; a bad one is a UserError whose field() is its JSON pointer ("/run/prompt_len"),
// a valid but unsupported one (a rope scaling type other than llama3 or yarn) an UnsupportedError.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "foundry/DType.h"
#include "foundry/steps/AttentionProblem.h"

namespace foundry {

/// What one run does: a prefill of `promptLen` tokens then `decodeTokens` single-token steps, over the
/// first `layers` layers, with random inputs from `seed`.
struct RunSpec {
  std::uint32_t batch = 1;
  std::uint32_t promptLen = 64;
  std::uint32_t decodeTokens = 8;  ///< 0: prefill only
  std::uint32_t layers = 1;        ///< layers to run, 1..ModelConfig::layers (default in JSON: all)
  DType dtype = DType::F16;        ///< of q, k, v and o: F16, BF16 or F32
  std::optional<DType> kvDtype;    ///< of the KV caches, where it differs from dtype
  DType cacheType() const { return kvDtype.value_or(dtype); }
  std::uint64_t seed = 1;
  bool check = true;               ///< compare against the CPU reference
  /// Paged KV caches: pages of this many rows in a pool per layer, each sequence's pages in a
  /// shuffled order (one block table for every layer); 0: a contiguous cache per layer.
  std::uint32_t pageSize = 0;
  /// One prompt length per sequence (each in 1..promptLen): sequence b prefills promptOf(b) tokens
  /// and decodes from there. Empty: every sequence's prompt is promptLen.
  std::vector<std::uint32_t> promptLens;
  std::uint32_t promptOf(std::uint32_t b) const { return promptLens.empty() ? promptLen : promptLens.at(b); }
};

/// Which layers a modifier applies to: every layer, layers l with l % every == offset (alternating
/// local and global layers), or a list.
struct LayerSelector {
  std::uint32_t every = 1;
  std::uint32_t offset = 0;
  std::vector<std::uint32_t> list;  ///< when non-empty, exactly these layers
  bool matches(std::uint32_t layer) const;
};

/// One attention modifier a model applies, as plain data (what its Hugging Face config says).
struct ModifierConfig {
  enum class Kind { SlidingWindow, SoftCap, Alibi, Sinks };
  Kind kind = Kind::SlidingWindow;
  std::uint32_t left = 0, right = 0;  ///< SlidingWindow: keys [q - left, q + right]
  double cap = 0;                     ///< SoftCap
  std::vector<double> values;         ///< Alibi: slopes (empty: BLOOM's); Sinks: logits (empty: drawn per layer)
  LayerSelector layers;
  std::string typeName() const;       ///< the JSON "type"
};

/// One model config file, validated.
struct ModelConfig {
  std::string name;    ///< e.g. "Llama-3.1-8B"
  std::string source;  ///< where the numbers come from, e.g. the Hugging Face repo id
  std::string note;    ///< free text, may be empty
  std::uint32_t layers = 1;
  std::uint32_t nHeads = 1;
  std::uint32_t nKvHeads = 1;
  std::uint32_t headDim = 128;   ///< of queries and keys
  std::uint32_t valueDim = 0;    ///< of values and outputs; 0: head_dim (DeepSeek-V2: 128 against 192)
  /// Absorbed MLA (DeepSeek-V2): one cache of latent rows; the values are the last value_dim columns
  /// of each key row, read in place (docs/attention.md, "Value rows narrower than key rows").
  bool latentValues = false;
  std::uint32_t maxContext = 1;  ///< the longest sequence the model supports
  /// Absent for models without rotary embeddings (ALiBi: MPT, BLOOM). rotaryDims is 0 when the file
  /// leaves it out (all of head_dim).
  std::optional<RopeSpec> rope;
  /// 0: 1 / sqrt(head_dim); query_pre_attn_scalar^-1/2 where given (Gemma 2); softmax_scale as given
  /// (DeepSeek-V2: its 192-wide heads' scale and YaRN's mscale, not the latent rows' width).
  double softmaxScale = 0;
  std::vector<ModifierConfig> modifiers;  ///< after the causal mask, in order
  RunSpec run;
  nlohmann::json tuning = nlohmann::json::object();  ///< knob overrides; already checked by applyTuning

  /// Query heads per KV head.
  std::uint32_t group() const { return nHeads / nKvHeads; }
  std::uint32_t vDim() const { return valueDim ? valueDim : headDim; }
  /// The modifiers of `layer`, in order.
  std::vector<ModifierConfig> modifiersOf(std::uint32_t layer) const;
  /// Tokens in the KV cache at the end of the run.
  std::uint32_t totalTokens() const { return run.promptLen + run.decodeTokens; }
};

/// Sizes are bounded by configs/schema.json (products of its maxima fit in 64 bits). Config files larger
/// than this are rejected unread.
inline constexpr std::size_t kMaxConfigBytes = std::size_t(16) << 20;

/// Command-line changes to a config's run. Values are signed and wide so that whatever the user typed
/// is checked here, with the flag name as the error's field ("--prompt-len").
struct RunOverrides {
  std::optional<std::int64_t> batch;         ///< --batch
  std::optional<std::int64_t> promptLen;     ///< --prompt-len (without --prompt-lens: every sequence's)
  std::optional<std::int64_t> decodeTokens;  ///< --decode-tokens
  std::optional<std::int64_t> layers;        ///< --layers
  std::optional<std::string> dtype;          ///< --dtype
  std::optional<std::string> kvDtype;        ///< --kv-dtype
  std::optional<std::int64_t> pageSize;      ///< --page-size
  /// --prompt-lens "100,2000,4096": sets batch (unless --batch) and prompt_len to the longest (unless
  /// --prompt-len).
  std::optional<std::string> promptLens;
};

/// Parses and validates a config. `origin` (a path, "<stdin>") is named in every error message.
/// Throws UserError / UnsupportedError only, whatever the input. The rules between fields (prompt_len
/// within max_context, ...) are checked on the run as `overrides` leave it, so a flag can bring a run
/// section that breaks them back within them.
ModelConfig parseModelConfig(std::string_view text, const std::string& origin, const RunOverrides& overrides = {});
/// Each field's own checks alone (type, range, enum, known keys), without configs/schema.json and
/// without the rules between fields: what the schema states too, for the test that keeps them equal.
ModelConfig readModelConfigFields(const nlohmann::json& doc, const std::string& origin);
/// Reads and parses a file; a file that cannot be read or is over kMaxConfigBytes is a UserError
/// naming the path.
ModelConfig loadModelConfig(const std::filesystem::path& path, const RunOverrides& overrides = {});

/// `config` with `overrides` applied and every rule checked again.
ModelConfig applyOverrides(const ModelConfig& config, const RunOverrides& overrides);

struct HeadFlags {
  std::uint32_t heads = 0, kvHeads = 0, headDim = 0;
};

/// Heads, head dimension and storage given by flags instead of a config (`foundry kernels --heads 32
/// --kv-heads 8 --head-dim 128 --kv-dtype int8 --page-size 64`), checked as a config's fields are: each
/// in the range configs/schema.json gives the field, --heads a multiple of --kv-heads, the cache's rows
/// whole blocks of its format and its pages whole blocks. Errors name the flags.
struct LayoutFlags {
  HeadFlags heads;
  DType dtype = DType::F16;
  DType cacheType = DType::F16;
  std::uint32_t pageSize = 0;
};
LayoutFlags checkLayoutFlags(std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim,
                             const std::optional<std::string>& dtype, const std::optional<std::string>& kvDtype,
                             std::optional<std::int64_t> pageSize);

}  // namespace foundry
