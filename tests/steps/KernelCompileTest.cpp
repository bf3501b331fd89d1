// Compile-only: every kernel variant the stages can emit compiles with shaderc, for the lavapipe and
// H200 presets, D 64 and 128, f16 and f32. No device is needed. The decode and prefill knob spaces are
// too large to compile exhaustively, so they are sampled to cover every pair of knob values that
// occurs among the usable variants (which covers every value of every knob); the sample is checked.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

#include "foundry/CoopMatProbe.h"
#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/KvQuant.h"
#include "foundry/ShaderCompiler.h"
#include "foundry/stages/CeilingStages.h"
#include "foundry/stages/FlashDecodeFusedStage.h"
#include "foundry/stages/FlashDecodeSplitKReduceStage.h"
#include "foundry/stages/FlashDecodeStage.h"
#include "foundry/stages/HeadLayoutStage.h"
#include "foundry/stages/KvAccessStage.h"
#include "foundry/stages/KvAppendStage.h"
#include "foundry/stages/KvQuantAppendStage.h"
#include "foundry/stages/ReferenceStages.h"
#include "foundry/stages/RopeStage.h"
#include "foundry/stages/SdpaPrefillSplitKPartStage.h"
#include "foundry/stages/SdpaPrefillSplitKReduceStage.h"
#include "foundry/stages/SdpaPrefillStage.h"
#include "foundry/stages/modifiers/AlibiStage.h"
#include "foundry/stages/modifiers/CausalStage.h"
#include "foundry/stages/modifiers/KeyLengthsStage.h"
#include "foundry/stages/modifiers/MaskStage.h"
#include "foundry/stages/modifiers/SinksStage.h"
#include "foundry/stages/modifiers/SlidingWindowStage.h"
#include "foundry/stages/modifiers/SoftCapStage.h"
#include "foundry/steps/FlashAttentionStep.h"
#include "foundry/steps/SdpaReferenceStep.h"
#include "foundry/testing/ShapeCall.h"
#include "support/AttentionHarness.h"
#include "support/CachedCompiler.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

constexpr std::uint32_t kSpirvMagic = 0x07230203;

// ---- pairwise sampling ----------------------------------------------------------------------------

/// A point in a knob space: one value index per axis.
using Point = std::vector<std::uint32_t>;

/// Picks points from `candidates` greedily until every pair of (axis, value) that occurs in some
/// candidate occurs in a picked one. Deterministic.
std::vector<std::size_t> coverPairs(const std::vector<Point>& candidates, const std::vector<std::uint32_t>& axisSizes) {
  const std::size_t axes = axisSizes.size();
  std::vector<std::uint32_t> offset(axes, 0);
  std::uint32_t values = 0;
  for (std::size_t a = 0; a < axes; ++a) {
    offset[a] = values;
    values += axisSizes[a];
  }
  // Every candidate's pairs (and single values, as pairs with themselves) as indices into a flat table.
  std::vector<std::vector<std::uint32_t>> pairs(candidates.size());
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    for (std::size_t a = 0; a < axes; ++a) {
      for (std::size_t b = a; b < axes; ++b) {
        pairs[c].push_back((offset[a] + candidates[c][a]) * values + offset[b] + candidates[c][b]);
      }
    }
  }
  std::vector<char> needed(std::size_t(values) * values, 0);
  for (const auto& ps : pairs) {
    for (auto p : ps) needed[p] = 1;
  }
  std::vector<std::size_t> picked;
  while (true) {
    std::size_t best = candidates.size(), bestGain = 0;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      std::size_t gain = 0;
      for (auto p : pairs[c]) gain += needed[p];
      if (gain > bestGain) best = c, bestGain = gain;
    }
    if (best == candidates.size()) break;
    for (auto p : pairs[best]) needed[p] = 0;
    picked.push_back(best);
  }
  return picked;
}

/// Per axis, the value indices that occur in `points` (selected by `which`).
std::vector<std::set<std::uint32_t>> valuesSeen(const std::vector<Point>& points, const std::vector<std::size_t>& which,
                                                std::size_t axes) {
  std::vector<std::set<std::uint32_t>> seen(axes);
  for (auto i : which) {
    for (std::size_t a = 0; a < axes; ++a) seen[a].insert(points[i][a]);
  }
  return seen;
}

/// Calls `f` with every point of the space that has `sizes[a]` values on axis a.
template <typename F>
void forEachPoint(const std::vector<std::uint32_t>& sizes, F f) {
  Point x(sizes.size(), 0);
  while (true) {
    f(x);
    std::size_t a = 0;
    while (a < sizes.size() && ++x[a] == sizes[a]) x[a++] = 0;
    if (a == sizes.size()) return;
  }
}

std::vector<std::size_t> all(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// ---- fixture --------------------------------------------------------------------------------------

class KernelCompile : public ::testing::TestWithParam<std::string> {
 protected:
  DeviceInfo device = parseDevicePreset(GetParam());
  std::uint32_t sg = device.subgroupSize;
  test::CachedCompiler compiler{ShaderCompiler::Optimization::None};

  KernelBuilder builder() const { return KernelBuilder(device, SnippetLibrary::embedded()); }
  std::uint32_t auxWorkgroup() const { return std::max<std::uint32_t>(64, sg); }

  /// Compiles `src`; a failure is reported with the compiler's quoted message and the kernel name.
  void expectCompiles(const KernelSource& src) {
    try {
      const auto spirv = compiler.compile(src);
      ASSERT_FALSE(spirv.empty()) << src.name;
      EXPECT_EQ(spirv.front(), kSpirvMagic) << src.name;
      ++compiled;
    } catch (const Error& e) {
      ADD_FAILURE() << src.name << ":\n" << e.what();
    }
  }
  /// Builds with `build` and compiles; a builder error is a failure naming `what`.
  template <typename F>
  void buildAndCompile(const std::string& what, F build) {
    SCOPED_TRACE(what);
    KernelSource src;
    try {
      src = build();
    } catch (const Error& e) {
      ADD_FAILURE() << what << " did not build: " << e.what();
      return;
    }
    expectCompiles(src);
  }

  int compiled = 0;
};

// ---- decode ---------------------------------------------------------------------------------------

TEST_P(KernelCompile, DecodeVariants) {
  // Axes: head_dim, dtype, heads per workgroup, warps, keys per warp, vector width, partial storage,
  // scalar, split (none, a reduce kernel, merged in the last workgroup), query source (plain, fused RoPE
  // rotate-half, fused RoPE interleaved over half of D).
  std::vector<std::uint32_t> kpw;
  for (std::uint32_t k = 1; k <= sg; k *= 2) kpw.push_back(k);
  const std::vector<std::uint32_t> dims = {64, 128}, heads = {1, 2, 4, 8}, warps = {1, 2, 4, 8, 16},
                                   vecs = {1, 2, 4, 8, 16};
  const std::vector<DType> dtypes = {DType::F16, DType::BF16, DType::F32, DType::I8, DType::Q8_0};
  const std::vector<PartialStorage> partials = {PartialStorage::Float, PartialStorage::Half};
  const std::vector<std::uint32_t> sizes = {2, 5, 4, 5, std::uint32_t(kpw.size()), 5, 2, 2, 3, 3};

  std::vector<Point> points;
  std::vector<DecodeVariant> variants;
  forEachPoint(sizes, [&](const Point& x) {
    DecodeVariant v;
    v.headDim = dims[x[0]];
    v.dtype = dtypes[x[1]];
    if (quantized(v.dtype)) {  // a cache format only; rows of whole 16-code loads
      v.queryType = v.outputType = DType::F16;
      v.strideAlign = 16;
    }
    v.heads = heads[x[2]];
    v.warps = warps[x[3]];
    v.keysPerWarp = kpw[x[4]];
    v.vecWidth = vecs[x[5]];
    v.partial = partials[x[6]];
    v.scalar = x[7] == 1;
    v.split = x[8] >= 1;
    v.fusedReduce = x[8] == 2;
    // The scalar variant ignores keys per warp and vector width: keep one of each.
    if (v.scalar && (x[4] != 0 || x[5] != 0)) return;
    if (!v.unusableReason(sg).empty()) return;
    if (v.workgroupSize(sg) > device.maxWorkgroupInvocations) return;
    if (v.sharedBytes(sg) > device.maxSharedMemoryBytes) return;
    if (v.partial == PartialStorage::Half && !device.fp16Arithmetic) return;
    points.push_back(x);
    variants.push_back(v);
  });
  ASSERT_GT(points.size(), 100u);
  const auto picked = coverPairs(points, sizes);
  // Every value of every knob that some usable variant takes is compiled at least once.
  EXPECT_EQ(valuesSeen(points, picked, sizes.size()), valuesSeen(points, all(points.size()), sizes.size()));
  const auto seen = valuesSeen(points, picked, sizes.size());
  EXPECT_EQ(seen[3].size(), 5u) << "every warp count";
  EXPECT_EQ(seen[4].size(), kpw.size()) << "every keys-per-warp up to the subgroup size";
  EXPECT_EQ(seen[1].size(), 5u) << "every K/V format";
  EXPECT_EQ(seen[5].size(), 5u) << "every vector width";
  EXPECT_EQ(seen[8].size(), 3u) << "every way of splitting";

  for (const auto i : picked) {
    const DecodeVariant& v = variants[i];
    const std::uint32_t query = points[i][9];
    const std::string what = fmt::format("decode {}{}", v.key(),
                                         query == 0   ? ""
                                         : query == 1 ? " rope"
                                                      : " rope-gptj-half");
    buildAndCompile(what, [&] {
      KernelBuilder b = builder();
      b.workgroup(v.workgroupSize(sg)).emplace<HeadLayoutStage>(HeadLayoutStage::Grid::Decode, v.heads);
      b.emplace<KvAccessStage>(v.kvAccess());
      if (query == 0) {
        b.emplace<FlashDecodeStage>(v);
      } else {
        const RopeStageParams rp{v.headDim, query == 1 ? v.headDim : v.headDim / 2, query == 2, v.qType(), v.heads};
        b.emplace<RopeStage>(RopeStage::Mode::SharedQuery, rp).emplace<FlashDecodeFusedStage>(v);
      }
      KernelSource src = b.build();
      // The Selector's shared-memory estimate is what the builder counts.
      EXPECT_EQ(src.layout.sharedBytes, v.sharedBytes(sg)) << v.key();
      return src;
    });
  }
  RecordProperty("decode_kernels", compiled);
  std::cout << "[ " << GetParam() << " ] compiled " << compiled << " decode kernels of " << points.size()
            << " usable variants\n";
}

TEST_P(KernelCompile, MergedDecodeBatchesItsLoadsWhereInvocationsMergeSeveralElements) {
  // The last workgroup's merge takes the batched form (the loads of all its elements before any fold)
  // where the variant asks for it, which it may only where the heads' rows outnumber the invocations:
  // on the H200, D80 and D128 with 4 heads on 256 invocations, and not D64 (docs/performance.md, "The
  // Split-K merge's loads"). Where the rows leave some invocations an element fewer (D72 and D80
  // there), the fold skips them and takes each batch at its maximum (SPLITK_RAGGED).
  for (const std::uint32_t d : {64u, 72u, 80u, 128u}) {
    DecodeVariant v;
    v.headDim = d;
    v.heads = 4;
    v.warps = 8;
    v.keysPerWarp = sg / (d % 16 == 0 ? 8 : 4);  // 8 or 4 lanes per key: whole pairs for every D here
    v.vecWidth = 2;
    v.split = v.fusedReduce = true;
    const bool batched = v.heads * d > v.workgroupSize(sg);
    v.batchedMerge = true;
    EXPECT_EQ(v.unusableReason(sg).empty(), batched) << v.key();
    v.batchedMerge = batched;
    ASSERT_EQ(v.unusableReason(sg), "") << v.key();
    buildAndCompile(v.key(), [&] {
      KernelBuilder b = builder();
      b.workgroup(v.workgroupSize(sg)).emplace<HeadLayoutStage>(HeadLayoutStage::Grid::Decode, v.heads);
      b.emplace<KvAccessStage>(v.kvAccess()).emplace<FlashDecodeStage>(v);
      KernelSource src = b.build();
      EXPECT_EQ(src.glsl.find("splitk_merge_batched((batch") != std::string::npos, batched) << v.key();
      EXPECT_EQ(src.glsl.find("splitk_merge(row0") != std::string::npos, !batched) << v.key();
      const bool ragged = batched && (v.heads * d) % v.workgroupSize(sg) != 0;
      EXPECT_EQ(src.glsl.find("#define SPLITK_RAGGED 1") != std::string::npos, ragged) << v.key();
      return src;
    });
  }
  EXPECT_EQ(compiled, 4);
}

/// The accesses in `spirv` to function-scope variables through an index that is not a constant: arrays
/// a driver may keep in local memory, indexed at run time.
int localArraysIndexedAtRunTime(const std::vector<std::uint32_t>& spirv) {
  constexpr std::uint32_t kOpVariable = 59, kOpAccessChain = 65, kOpInBoundsAccessChain = 66, kFunction = 7;
  std::set<std::uint32_t> locals, constants;
  const auto each = [&](auto f) {
    for (std::size_t i = 5; i < spirv.size();) {
      const std::uint32_t words = spirv[i] >> 16;
      if (words == 0 || i + words > spirv.size()) break;
      f(spirv[i] & 0xffffu, &spirv[i], words);
      i += words;
    }
  };
  each([&](std::uint32_t op, const std::uint32_t* w, std::uint32_t n) {
    if (op == kOpVariable && n >= 4 && w[3] == kFunction) locals.insert(w[2]);
    if ((op >= 41 && op <= 46) || (op >= 48 && op <= 52)) constants.insert(w[2]);  // OpConstant*, OpSpecConstant*
  });
  int count = 0;
  each([&](std::uint32_t op, const std::uint32_t* w, std::uint32_t n) {
    if ((op != kOpAccessChain && op != kOpInBoundsAccessChain) || n < 5 || !locals.count(w[3])) return;
    for (std::uint32_t k = 4; k < n; ++k) {
      if (!constants.count(w[k])) {
        ++count;
        break;
      }
    }
  });
  return count;
}

TEST_P(KernelCompile, PlannedDecodeKernelsIndexNoLocalArrayAtRunTime) {
  // Compiled as Runtime compiles them (spirv-opt's performance passes), the kernels the step builds for
  // decode at D64, D128 and D256 keep every register array indexed by constants: a `continue` in the
  // per-head epilogue once left its loop rolled, the accumulators in local arrays indexed by head (0.3
  // us at D128 kv 65536 on the H200). Not asserted where the plan takes the uneven Split-K merge (D80,
  // D96 on the H200), whose batch arrays measured faster as spirv-opt leaves them than rewritten without.
  // Cooperative-matrix kernels (the H200's f16 decode at D64 and D128) skip spirv-opt in Runtime, so
  // the property is not theirs: the subgroup kernel is also planned with the tensor cores off.
  const test::CachedCompiler optimising{ShaderCompiler::Optimization::Performance};
  std::set<std::string> decodeKernels;
  for (const auto& env : std::vector<std::map<std::string, std::string>>{{}, {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "0"}}}) {
    FlashAttentionStep step(device, SnippetLibrary::embedded(), AttentionOptions::fromEnvironment(env));
    for (const std::uint32_t d : {64u, 128u, 256u}) {
      for (const std::uint32_t kv : {4096u, 65536u}) {
        test::CallShape shape;
        shape.headDim = d;
        shape.kvLen = kv;
        for (const KernelSource& src : step.kernelsFor(test::shapeCall(shape))) {
          if (src.usesCoopMat) continue;
          ASSERT_EQ(src.glsl.find("#define SPLITK_RAGGED 1"), std::string::npos) << src.name;
          EXPECT_EQ(localArraysIndexedAtRunTime(optimising.compile(src)), 0) << src.name;
          if (src.name.find("FlashDecode") != std::string::npos) decodeKernels.insert(src.name);
        }
      }
    }
  }
  EXPECT_GE(decodeKernels.size(), 3u) << "a subgroup decode kernel for each head dim";
}

// ---- prefill (subgroup variant) -------------------------------------------------------------------

TEST_P(KernelCompile, PrefillSubgroupVariants) {
  // Axes: head_dim, dtype, f16 tiles, warps, rows per warp, keys per tile, stages, longest tiles first,
  // split.
  std::vector<std::uint32_t> keys;
  for (std::uint32_t k = sg; k <= 64; k *= 2) keys.push_back(k);
  const std::vector<std::uint32_t> dims = {64, 128}, warps = {1, 2, 4, 8}, rows = {1, 2, 4, 8};
  const std::vector<DType> dtypes = {DType::F16, DType::BF16, DType::F32};
  const std::vector<std::uint32_t> sizes = {2, 3, 2, 4, 4, std::uint32_t(keys.size()), 2, 2, 2};

  std::vector<Point> points;
  std::vector<PrefillVariant> variants;
  forEachPoint(sizes, [&](const Point& x) {
    PrefillVariant v;
    v.headDim = dims[x[0]];
    v.dtype = dtypes[x[1]];
    v.halfTiles = x[2] == 1;
    v.coopMat = false;
    v.warps = warps[x[3]];
    v.rowsPerWarp = rows[x[4]];
    v.keysPerTile = keys[x[5]];
    v.stages = x[6] + 1;
    v.longestFirst = x[7] == 1;
    v.split = x[8] == 1;
    if (v.dtype != DType::F16 && v.halfTiles) return;  // bf16 and f32 inputs are staged as f32
    if (!v.unusableReason(sg).empty()) return;
    if (v.workgroupSize(sg) > device.maxWorkgroupInvocations) return;
    if (v.sharedBytes(sg) > device.maxSharedMemoryBytes) return;
    points.push_back(x);
    variants.push_back(v);
  });
  ASSERT_GT(points.size(), 50u);
  const auto picked = coverPairs(points, sizes);
  EXPECT_EQ(valuesSeen(points, picked, sizes.size()), valuesSeen(points, all(points.size()), sizes.size()));
  const auto seen = valuesSeen(points, picked, sizes.size());
  for (std::size_t a : {0, 1, 2, 6, 7, 8}) EXPECT_EQ(seen[a].size(), sizes[a]) << "axis " << a;

  for (const auto i : picked) {
    const PrefillVariant& v = variants[i];
    buildAndCompile(fmt::format("prefill {}", v.key()), [&] {
      KernelBuilder b = builder();
      b.workgroup(v.workgroupSize(sg)).emplace<HeadLayoutStage>(HeadLayoutStage::Grid::Prefill, 1);
      b.emplace<KvAccessStage>(v.kvAccess());
      if (v.split)
        b.emplace<SdpaPrefillSplitKPartStage>(v);
      else
        b.emplace<SdpaPrefillStage>(v);
      KernelSource src = b.build();
      EXPECT_FALSE(src.usesCoopMat);
      EXPECT_EQ(src.layout.sharedBytes, v.sharedBytes(sg)) << v.key();
      return src;
    });
  }
  std::cout << "[ " << GetParam() << " ] compiled " << compiled << " prefill kernels of " << points.size()
            << " usable variants\n";
}

// ---- the other stages ---------------------------------------------------------------------------

TEST_P(KernelCompile, ReduceRopeKvAppendAndReferenceStages) {
  for (const std::uint32_t d : {64u, 128u}) {
    for (const DType t : {DType::F16, DType::BF16, DType::F32}) {
      const std::string dt(dtypeName(t));
      const KvAccessStage store(KvAccess{t, 1, true}), load(KvAccess{t, 1, false});
      auto withCache = [&](const KvAccessStage& access) {
        KernelBuilder b = builder();
        b.add(std::make_shared<KvAccessStage>(access));
        return b;
      };
      buildAndCompile(fmt::format("decode reduce D{} {}", d, dt), [&] {
        return builder().workgroup(auxWorkgroup()).emplace<FlashDecodeSplitKReduceStage>(d, t).build();
      });
      buildAndCompile(fmt::format("prefill reduce D{} {}", d, dt), [&] {
        return builder().workgroup(auxWorkgroup()).emplace<SdpaPrefillSplitKReduceStage>(d, t).build();
      });
      for (const bool interleaved : {false, true}) {
        for (const std::uint32_t rot : {d, d / 2}) {
          const RopeStageParams rp{d, rot, interleaved, t, 1};
          buildAndCompile(fmt::format("rope in place D{} r{} {} {}", d, rot, interleaved, dt), [&] {
            return builder().workgroup(auxWorkgroup()).emplace<RopeStage>(RopeStage::Mode::InPlace, rp).build();
          });
          buildAndCompile(fmt::format("kv append rope D{} r{} {} {}", d, rot, interleaved, dt),
                          [&] { return withCache(store).workgroup(auxWorkgroup()).emplace<KvAppendStage>(d, t, rp).build(); });
        }
      }
      if (t == DType::F16) {
        for (const DType cache : {DType::I8, DType::Q8_0}) {
          const KvAccessStage quantStore(KvAccess{cache, 1, true});
          const RopeStageParams rp{d, d, false, t, 1};
          buildAndCompile(fmt::format("quantized kv append D{} {}", d, dtypeName(cache)), [&] {
            return withCache(quantStore).workgroup(KvQuantAppendStage::kWorkgroup).emplace<KvQuantAppendStage>(d, t, rp).build();
          });
        }
      }
      // RoPE into shared memory for a decode of several heads (the rest of SharedQuery is covered by
      // DecodeVariants, which fuses it).
      buildAndCompile(fmt::format("rope shared query D{} {}", d, dt), [&] {
        DecodeVariant v;
        v.headDim = d;
        v.dtype = t;
        v.heads = 4;
        v.keysPerWarp = 1;
        v.vecWidth = 1;
        v.warps = 2;
        return builder()
            .workgroup(v.workgroupSize(sg))
            .emplace<HeadLayoutStage>(HeadLayoutStage::Grid::Decode, 4)
            .emplace<KvAccessStage>(v.kvAccess())
            .emplace<RopeStage>(RopeStage::Mode::SharedQuery, RopeStageParams{d, d, false, t, 4})
            .emplace<FlashDecodeFusedStage>(v)
            .build();
      });
      buildAndCompile(fmt::format("kv append D{} {}", d, dt), [&] {
        return withCache(store).workgroup(auxWorkgroup()).emplace<KvAppendStage>(d, t, std::nullopt).build();
      });
      // Without modifiers, and with the causal mask hooked into the scores kernel.
      for (const bool causal : {false, true}) {
        const ReferenceParams p{d, d, t, t, t, auxWorkgroup()};
        auto chain = [&](StagePtr stage) {
          KernelBuilder b = withCache(load);
          b.workgroup(p.workgroup);
          if (causal) b.emplace<CausalStage>();
          return b.add(std::move(stage)).build();
        };
        buildAndCompile(fmt::format("reference scores D{} {} causal={}", d, dt, causal),
                        [&] { return chain(std::make_shared<ReferenceScoresStage>(p)); });
        buildAndCompile(fmt::format("reference softmax D{} {}", d, dt),
                        [&] { return builder().workgroup(p.workgroup).emplace<ReferenceSoftmaxStage>(p).build(); });
        buildAndCompile(fmt::format("reference pv D{} {}", d, dt),
                        [&] { return withCache(load).workgroup(p.workgroup).emplace<ReferencePvStage>(p).build(); });
      }
    }
  }
  EXPECT_EQ(compiled, 2 * 3 * (2 + 8 + 1 + 1 + 6) + 2 * 2);  // and the int8 and q8_0 appends
}

// ---- what the steps build ------------------------------------------------------------------------

TEST_P(KernelCompile, KernelsTheStepsChooseCompile) {
  // The Selector's own choices for typical calls, through the steps that record them. Prefill with
  // cooperative matrices is left to its own tests: f16 prefill here takes the subgroup variant.
  FlashAttentionStep flash(device, SnippetLibrary::embedded(),
                           AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}));
  // Split-K decode merges in its last workgroup by default; the reduce kernel is the knob's choice.
  FlashAttentionStep separate(device, SnippetLibrary::embedded(),
                              AttentionOptions::fromEnvironment(
                                  {{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"}}));
  SdpaReferenceStep reference(device, SnippetLibrary::embedded());
  std::set<std::string> names;
  for (const std::uint32_t d : {64u, 128u}) {
    for (const DType t : {DType::F16, DType::BF16, DType::F32}) {
      std::vector<AttentionCall> calls;
      for (const std::uint32_t kvLen : {200u, 16384u}) {  // without and with Split-K
        test::CallShape s;
        s.nHeads = 32;
        s.nKvHeads = 8;
        s.kvLen = kvLen;
        s.headDim = d;
        s.dtype = t;
        calls.push_back(test::shapeCall(s));
        calls.push_back(test::withRope(test::shapeCall(s), d, kvLen - 1));
        s.nHeads = s.nKvHeads = 1;
        calls.push_back(test::shapeCall(s));  // one workgroup: Split-K decode on a long cache anywhere
        s.qLen = 7;
        calls.push_back(test::shapeCall(s));  // few query tiles: Split-K prefill on a long cache
        s.qLen = 200;
        s.nHeads = 32;
        s.nKvHeads = 8;
        calls.push_back(test::shapeCall(s));
      }
      // Every one again returning its log-sum-exp.
      for (std::size_t i = 0, n = calls.size(); i < n; ++i) {
        calls.push_back(calls[i]);
        calls.back().lse = Tensor::describe("lse", DType::F32, {1, calls[i].q.dim(1), calls[i].q.dim(2)});
      }
      for (const auto& call : calls) {
        for (FlashAttentionStep* step : {&flash, &separate}) {
          for (const auto& k : step->kernelsFor(call)) {
            if (names.insert(k.name).second) expectCompiles(k);
          }
        }
      }
      // The reference path's scores for 200 x 200 keys fit any device's storage buffer.
      for (const auto& k : reference.kernelsFor(calls[4])) {
        if (names.insert(k.name).second) expectCompiles(k);
      }
    }
  }
  // Decode, decode split + reduce, fused RoPE decode, prefill, prefill split + reduce, reference x3.
  std::set<std::string> kinds;
  for (const auto& n : names) kinds.insert(n.substr(0, n.find("__")));
  EXPECT_THAT(kinds, ::testing::IsSupersetOf({"HeadLayout_KvAccess_FlashDecode", "HeadLayout_KvAccess_Rope_FlashDecodeFused",
                                              "FlashDecodeSplitKReduce", "HeadLayout_KvAccess_Causal_SdpaPrefill",
                                              "HeadLayout_KvAccess_Causal_SdpaPrefillSplitKPart", "SdpaPrefillSplitKReduce",
                                              "KvAccess_Causal_ReferenceScores", "ReferenceSoftmax", "KvAccess_ReferencePv"}));
}

// ---- modifiers -----------------------------------------------------------------------------------

TEST_P(KernelCompile, EveryModifierInEveryVariantCompiles) {
  // Shape-only tensors: the kernels are built and compiled, nothing runs. On the h200 preset this
  // covers the cooperative-matrix prefill with the register and the shared-memory softmax, which
  // lavapipe cannot run.
  auto perHead = [](std::uint32_t n) {
    PerHeadValues v;
    v.tensor = Tensor::describe("values", DType::F32, {n});
    v.values.assign(n, 0.5);
    return v;
  };
  const std::uint32_t heads = 8;
  const std::vector<std::pair<std::string, Modifiers>> sets = {
      {"window softcap sinks", {std::make_shared<SlidingWindowStage>(100, 0), std::make_shared<SoftCapStage>(30.0),
                                std::make_shared<SinksStage>(perHead(heads))}},
      {"alibi lengths", {std::make_shared<AlibiStage>(perHead(heads)),
                         std::make_shared<KeyLengthsStage>(Tensor::describe("lens", DType::U32, {2}),
                                                           std::vector<std::uint32_t>{300, 250})}},
      {"top-left causal additive mask",
       {std::make_shared<CausalStage>(CausalStage::Align::TopLeft),
        MaskStage::additive(Tensor::describe("mask", DType::F16, {2, heads, 300, 300}),
                            std::vector<float>(2 * heads * 300 * 300, 0.0f))}},
      {"bit mask", {MaskStage::bits(Tensor::describe("mask", DType::U32, {1, 1, 300, 10}),
                                    std::vector<std::uint32_t>(3000, ~0u))}},
  };
  std::vector<AttentionOptions> knobs = {
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}),
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SCALAR", "1"}, {"FOUNDRY_FA_PREFILL_COOPMAT", "0"},
                                       {"FOUNDRY_FA_PREFILL_SPLIT_K", "3"}}),
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "0"},
                                       {"FOUNDRY_FA_PREFILL_COOPMAT", "0"}}),
      AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_SPLIT_K", "3"}, {"FOUNDRY_FA_DECODE_FUSED_REDUCE", "1"}})};
  if (device.hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    knobs.push_back(AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}}));
    knobs.push_back(AttentionOptions::fromEnvironment(
        {{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}, {"FOUNDRY_FA_PREFILL_REGISTER_SOFTMAX", "0"}}));
    knobs.push_back(AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}, {"FOUNDRY_FA_PREFILL_SPLIT_K", "2"}}));
    knobs.push_back(AttentionOptions::fromEnvironment({{"FOUNDRY_FA_PREFILL_COOPMAT", "1"}, {"FOUNDRY_FA_PREFILL_LOADER", "1"}}));
    knobs.push_back(AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}, {"FOUNDRY_FA_DECODE_SPLIT_K", "3"}}));
  }
  std::set<std::string> names;
  std::size_t coopmat = 0;
  for (const auto& [what, mods] : sets) {
    for (const std::uint32_t qLen : {1u, 200u}) {
      test::CallShape s = test::prefillShape(heads, 2, qLen, 300, 64);
      s.batch = 2;
      AttentionCall call = test::shapeCall(s);
      call.modifiers = mods;
      // Masks are [.., q_len, ..]: made for this call's.
      if (what == "top-left causal additive mask") {
        call.causal = false;
        call.modifiers.back() = MaskStage::additive(Tensor::describe("mask", DType::F16, {2, heads, qLen, 300}),
                                                    std::vector<float>(2 * heads * qLen * 300, 0.0f));
      } else if (what == "bit mask") {
        call.modifiers.back() = MaskStage::bits(Tensor::describe("mask", DType::U32, {1, 1, qLen, 10}),
                                                std::vector<std::uint32_t>(qLen * 10, ~0u));
      }
      for (const auto& o : knobs) {
        FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
        for (const auto& k : step.kernelsFor(call)) {
          if (!names.insert(k.name).second) continue;
          SCOPED_TRACE(what);
          coopmat += k.usesCoopMat;
          expectCompiles(k);
        }
      }
      if (qLen > 1) {
        for (const auto& k : SdpaReferenceStep(device, SnippetLibrary::embedded()).kernelsFor(call)) {
          if (names.insert(k.name).second) expectCompiles(k);
        }
      }
    }
  }
  EXPECT_GE(names.size(), 30u);
  if (device.hasCoopMat({16, 16, 16, DType::F16, DType::F32})) {
    EXPECT_GE(coopmat, 12u);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, KernelCompile, ::testing::Values("lavapipe", "h200"),
                         [](const auto& param) { return test::gtestSafe(param.param); });

}  // namespace
}  // namespace foundry

namespace foundry {
namespace {

// The cooperative-matrix kernels only run on a GPU that has them; compiling them here catches GLSL
// mistakes before a device run does. Both softmax routes, split and not, with and without the LSE,
// D 64 and 128.
TEST(CoopMatKernels, PrefillProbeAndCeilingKernelsCompileForTheH200Preset) {
  const test::CachedCompiler compiler{ShaderCompiler::Optimization::None};
  int compiled = 0;
  auto compile = [&](const KernelSource& k) {
    try {
      EXPECT_FALSE(compiler.compile(k).empty()) << k.name;
      ++compiled;
    } catch (const Error& e) {
      ADD_FAILURE() << k.name << ":\n" << e.what();
    }
  };
  for (const char* preset : {"h200", "h200,quad=0"}) {
    const DeviceInfo device = parseDevicePreset(preset);
    compile(coopMatProbeKernel(device, SnippetLibrary::embedded()));
    compile(KernelBuilder(device, SnippetLibrary::embedded()).workgroup(256).emplace<ReadStreamStage>().build());
    compile(KernelBuilder(device, SnippetLibrary::embedded())
                .workgroup(512)
                .emplace<ReadStreamStage>(8, ReadStreamStage::Order::Blocked)
                .build());
    compile(KernelBuilder(device, SnippetLibrary::embedded())
                .workgroup(256)
                .emplace<ReadStreamStage>(16, ReadStreamStage::Order::Blocked, 8, 2)
                .build());
    compile(KernelBuilder(device, SnippetLibrary::embedded())
                .workgroup(256)
                .emplace<ReadStreamStage>(32, ReadStreamStage::Order::Ring)
                .build());
    compile(KernelBuilder(device, SnippetLibrary::embedded()).workgroup(128).emplace<MmaLoopStage>().build());
    for (const DType kv : {DType::I8, DType::Q8_0}) {  // dequantized to f16 as they are staged
      AttentionOptions o;
      o.faPrefillCoopMat = Force::On;
      o.faPrefillSplitK = 1u;
      FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
      AttentionCall call = test::shapeCall({.qLen = 512, .kvLen = 512});
      for (Tensor* t : {&call.k, &call.v}) {
        t->dtype = kv;
        if (kv == DType::I8) t->scales = std::make_shared<Tensor>(scalesShape(*t));
      }
      EXPECT_TRUE(step.plan(call).prefillVariant.coopMat) << dtypeName(kv);
      for (const auto& k : step.kernelsFor(call)) compile(k);
    }
    for (const std::uint32_t d : {64u, 128u}) {
      for (const bool split : {false, true}) {
       for (const bool lse : {false, true}) {
        AttentionOptions o;
        o.faPrefillCoopMat = Force::On;
        o.faPrefillSplitK = split ? 3u : 1u;
        FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
        test::CallShape s;
        s.nHeads = 32;
        s.nKvHeads = 8;
        s.qLen = split ? 16 : 512;
        s.kvLen = split ? 8192 : 512;
        s.headDim = d;
        s.lse = lse;
        const auto plan = step.plan(test::shapeCall(s));
        EXPECT_TRUE(plan.prefillVariant.coopMat);
        EXPECT_EQ(plan.prefillVariant.quadSoftmax, device.coopMatLayout.quad()) << preset;
        EXPECT_EQ(plan.prefillVariant.lse, lse && !split);
        for (const auto& k : step.kernelsFor(test::shapeCall(s))) compile(k);
       }
      }
    }
  }
  // Probe + 4 read streams + the MMA loop, int8 and q8_0 prefill, then per D, with and without the LSE:
  // prefill, part + reduce.
  EXPECT_EQ(compiled, 2 * (6 + 2 + 2 * 2 * (1 + 2)));
}

// Decode with the heads as rows of tensor-core products (FOUNDRY_FA_DECODE_TENSOR_CORES): f16 and
// int8 caches, rows of 64, 96 (f16) and 128, f32 q and output, the LSE, a soft cap, and every kernel
// the step plans (Split-K merged in the last workgroup); every modifier above.
TEST(CoopMatKernels, TensorCoreDecodeWithAClaimedEndCompilesForTheH200Preset) {
  // The tensor-core kernel with its rounds past each split's own chunk claimed (DecodeVariant::claims):
  // f16, bf16 and int8 (its pairs, V from registers), plain and with a window.
  const test::CachedCompiler compiler{ShaderCompiler::Optimization::None};
  const DeviceInfo device = parseDevicePreset("h200");
  const AttentionOptions o = AttentionOptions::fromEnvironment(
      {{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"}, {"FOUNDRY_FA_DECODE_CLAIMED_KEYS", "256"}});
  FlashAttentionStep step(device, SnippetLibrary::embedded(), o);
  int compiled = 0;
  for (const DType kv : {DType::F16, DType::BF16, DType::I8}) {
    for (const std::uint32_t d : {64u, 128u}) {
      test::CallShape s;
      s.qLen = 1;
      s.kvLen = 65536;
      s.headDim = d;
      AttentionCall call = test::shapeCall(s);
      for (Tensor* t : {&call.k, &call.v}) {
        t->dtype = kv;
        if (kv == DType::I8) t->scales = std::make_shared<Tensor>(scalesShape(*t));
      }
      if (d == 64) call.modifiers = {std::make_shared<SlidingWindowStage>(40000u, 0u)};
      const AttentionPlan plan = step.plan(call);
      EXPECT_TRUE(plan.decodeVariant.tensorCores && plan.decodeVariant.claims) << plan.describe();
      for (const auto& k : step.kernelsFor(call)) {
        EXPECT_NE(k.glsl.find("#define DC_CLAIMS 1"), std::string::npos) << k.name;
        try {
          EXPECT_FALSE(compiler.compile(k).empty()) << k.name;
          ++compiled;
        } catch (const Error& e) {
          ADD_FAILURE() << k.name << ":\n" << e.what();
        }
      }
    }
  }
  EXPECT_EQ(compiled, 6);
}

TEST(CoopMatKernels, TensorCoreDecodeCompilesForTheH200Preset) {
  const test::CachedCompiler compiler{ShaderCompiler::Optimization::None};
  const DeviceInfo device = parseDevicePreset("h200");
  // FOUNDRY_KERNEL_DIR's kernels where it is set, so that a kernel copy for the device is checked here first.
  const char* dir = std::getenv("FOUNDRY_KERNEL_DIR");
  const auto snippets = SnippetLibrary::select(dir != nullptr ? dir : "");
  int compiled = 0;
  // int8 rows of 128 as the table plans them (pairs, V from registers), with V whole, in halves with and
  // without the pairs, and from registers without them.
  struct Int8Rows {
    const char* pairs;
    const char* halves;
    const char* registers;
  };
  for (const DType kv : {DType::F16, DType::BF16, DType::I8}) {
    for (const std::uint32_t d : {64u, 96u, 128u}) {
      for (const Int8Rows r : {Int8Rows{"1", "auto", "auto"}, Int8Rows{"1", "0", "0"}, Int8Rows{"0", "1", "0"},
                               Int8Rows{"1", "1", "0"}, Int8Rows{"0", "0", "1"}}) {
        if (kv == DType::I8 && d == 96) continue;    // int8 takes whole 32-dimension scale chunks
        if (kv == DType::BF16 && d == 96) continue;  // f16's D96 covers the same code
        if (std::string(r.halves) != "auto" && (kv != DType::I8 || d != 128)) continue;
        const bool pairs = kv == DType::I8 && std::string(r.pairs) == "1";
        const bool registers = kv == DType::I8 && d == 128 && std::string(r.registers) != "0";
        const bool halves = kv == DType::I8 && d == 128 && std::string(r.halves) == "1";
        AttentionOptions o =
            AttentionOptions::fromEnvironment({{"FOUNDRY_FA_DECODE_TENSOR_CORES", "1"},
                                               {"FOUNDRY_FA_DECODE_TILE_PAIRS", kv == DType::I8 ? r.pairs : "auto"},
                                               {"FOUNDRY_FA_DECODE_VALUE_HALVES", r.halves},
                                               {"FOUNDRY_FA_DECODE_VALUE_REGISTERS", r.registers}});
        FlashAttentionStep step(device, snippets, o);
        test::CallShape s;
        // int8 D64 with groups of 8 heads: q's two bytes in two products (groups of up to 4 share one).
        s.nHeads = kv == DType::I8 && d == 64 ? 64 : 32;
        s.nKvHeads = 8;
        s.qLen = 1;
        s.kvLen = 65536;
        s.headDim = d;
        s.lse = d == 64;
        AttentionCall call = test::shapeCall(s);
        for (Tensor* t : {&call.k, &call.v}) {
          t->dtype = kv;
          if (kv == DType::I8) t->scales = std::make_shared<Tensor>(scalesShape(*t));
        }
        if (d == 128) call.q.dtype = call.o.dtype = DType::F32;
        if (d == 96) call.modifiers = {std::make_shared<SoftCapStage>(30.0)};
        const AttentionPlan plan = step.plan(call);
        EXPECT_TRUE(plan.decodeVariant.tensorCores) << plan.describe();
        EXPECT_EQ(plan.decodeVariant.tilePairs, pairs) << plan.describe();
        EXPECT_EQ(plan.decodeVariant.valueHalves, halves) << plan.describe();
        EXPECT_EQ(plan.decodeVariant.valueRegisters, registers) << plan.describe();
        for (const auto& k : step.kernelsFor(call)) {
          try {
            EXPECT_FALSE(compiler.compile(k).empty()) << k.name;
            ++compiled;
          } catch (const Error& e) {
            ADD_FAILURE() << k.name << ":\n" << e.what();
          }
        }
      }
    }
  }
  EXPECT_GE(compiled, 11);
}

}  // namespace
}  // namespace foundry
