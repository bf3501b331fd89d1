#include "foundry/steps/MergeStep.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"
#include "foundry/StorageFormat.h"
#include "foundry/KernelBuilder.h"
#include "foundry/Workspace.h"
#include "foundry/stages/LseMergeStage.h"
#include "foundry/steps/AttentionCall.h"

namespace foundry {

namespace {

constexpr std::uint32_t kWorkgroup = 64;
constexpr std::int64_t kMaxGrid = 65535;  // the least maxComputeWorkGroupCount Vulkan allows

/// (batch, heads, tokens, value_dim) of an output, and its (b, h, s) strides.
struct Rows {
  std::int64_t batch, heads, tokens, dim;
  std::uint32_t sb, sh, ss;
};

Rows rowsOf(const Tensor& t, const std::string& field) {
  const bool token = t.layout == Layout::TokenMajor;
  if (t.rank() != 4 || (!token && t.layout != Layout::HeadMajor)) {
    throw UserError(field, fmt::format("tensor '{}' is {}; an attention output is [batch, n_heads, q_len, value_dim] "
                                       "head-major or [batch, q_len, n_heads, value_dim] token-major",
                                       t.name, t.shapeString()));
  }
  requireRank4(t, field, "value_dim");
  auto u = [](std::int64_t x) { return static_cast<std::uint32_t>(x); };
  return {t.dim(0), t.dim(token ? 2 : 1), t.dim(token ? 1 : 2), t.dim(3),
          u(t.stride(0)), u(t.stride(token ? 2 : 1)), u(t.stride(token ? 1 : 2))};
}

void requireOutputDtype(const Tensor& t, const std::string& field) {
  if (t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F32) {
    throw UserError(field, fmt::format("tensor '{}' is {}; accepted: f16, bf16, f32", t.name, dtypeName(t.dtype)));
  }
}

void requireLse(const Tensor& t, const std::string& field, const Rows& r) {
  const std::vector<std::int64_t> want{r.batch, r.heads, r.tokens};
  if (t.dtype != DType::F32 || t.dims != want || !t.packed()) {
    throw UserError(field, fmt::format("tensor '{}' is {}; the log-sum-exp of [{}] rows is f32 [{}] packed [batch, "
                                       "n_heads, q_len]", t.name, t.shapeString(), fmt::join(want, ", "),
                                       fmt::join(want, ", ")));
  }
}

bool sameRows(const Rows& a, const Rows& b) {
  return a.batch == b.batch && a.heads == b.heads && a.tokens == b.tokens && a.dim == b.dim;
}

std::string rowsString(const Rows& r) {
  return fmt::format("batch {}, n_heads {}, q_len {}, value_dim {}", r.batch, r.heads, r.tokens, r.dim);
}

}  // namespace

MergeStep::MergeStep(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets)
    : device_(device), snippets_(std::move(snippets)) {}

MergeProblem MergeStep::validate(const MergeCall& call) const {
  if (call.parts.empty()) {
    throw UserError("parts", "no parts to merge: a merge takes one or more partial results (an output and its lse)");
  }
  const Rows first = rowsOf(call.parts[0].o, "parts[0].o");
  for (std::size_t i = 0; i < call.parts.size(); ++i) {
    const std::string field = fmt::format("parts[{}].o", i);
    const Tensor& o = call.parts[i].o;
    const Rows r = rowsOf(o, field);
    requireOutputDtype(o, field);
    if (o.dtype != call.parts[0].o.dtype) {
      throw UserError(field, fmt::format("mixed dtypes: part 0's output '{}' is {} but part {}'s '{}' is {}; the parts "
                                         "share one dtype", call.parts[0].o.name, dtypeName(call.parts[0].o.dtype), i,
                                         o.name, dtypeName(o.dtype)));
    }
    if (!sameRows(r, first)) {
      throw UserError(field, fmt::format("part {}'s output '{}' has {} but part 0's has {}; every part covers the same "
                                         "rows", i, o.name, rowsString(r), rowsString(first)));
    }
    if (o.layout != call.parts[0].o.layout || r.sb != first.sb || r.sh != first.sh || r.ss != first.ss) {
      throw UserError(field, fmt::format("part {}'s output '{}' is {} with strides [{}] but part 0's is {} with strides "
                                         "[{}]; the parts share one layout", i, o.name, o.shapeString(),
                                         fmt::join(o.strides, ", "), call.parts[0].o.shapeString(),
                                         fmt::join(call.parts[0].o.strides, ", ")));
    }
    requireLse(call.parts[i].lse, fmt::format("parts[{}].lse", i), first);
  }
  const Rows out = rowsOf(call.o, "o");
  requireOutputDtype(call.o, "o");
  if (!sameRows(out, first)) {
    throw UserError("o", fmt::format("the merged output '{}' has {} but the parts have {}", call.o.name,
                                     rowsString(out), rowsString(first)));
  }
  if (call.lse) requireLse(*call.lse, "lse", first);
  std::vector<std::pair<const Tensor*, std::string>> read;
  for (std::size_t i = 0; i < call.parts.size(); ++i) {
    read.emplace_back(&call.parts[i].o, fmt::format("parts[{}].o", i));
    read.emplace_back(&call.parts[i].lse, fmt::format("parts[{}].lse", i));
  }
  requireOwnElements(call.o, "o", read);
  if (call.lse) {
    read.emplace_back(&call.o, "o");
    requireOwnElements(*call.lse, "lse", read);
  }
  MergeProblem p;
  p.batch = static_cast<std::uint32_t>(first.batch);
  p.nHeads = static_cast<std::uint32_t>(first.heads);
  p.qLen = static_cast<std::uint32_t>(first.tokens);
  p.valueDim = static_cast<std::uint32_t>(first.dim);
  p.parts = static_cast<std::uint32_t>(call.parts.size());
  p.partDtype = call.parts[0].o.dtype;
  p.outDtype = call.o.dtype;
  p.lse = call.lse.has_value();
  if (p.batch == 0 || p.nHeads == 0 || p.qLen == 0 || p.valueDim == 0) {
    throw UserError("o", fmt::format("empty merge: {}", rowsString(out)));
  }
  if (first.heads > kMaxGrid || first.batch * ((first.tokens + kMaxGrid - 1) / kMaxGrid) > kMaxGrid) {
    throw UnsupportedError(fmt::format("a merge's grid is (q_len, n_heads, batch x q_len chunks of {0}), each at "
                                       "most {0}: {1}", kMaxGrid, rowsString(first)));
  }
  requireStorage(p.partDtype, device_, "parts");
  requireStorage(p.outDtype, device_, "o");
  return p;
}

const KernelSource& MergeStep::kernel(const MergeProblem& p, std::uint32_t parts, DType partDtype, DType outDtype,
                                      bool lse) {
  const LseMergeParams params{parts, p.valueDim, partDtype, outDtype, lse};
  const LseMergeStage stage(params);
  const std::string key = stage.key();
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    KernelBuilder b(device_, snippets_);
    b.workgroup(std::max(kWorkgroup, device_.subgroupSize)).emplace<LseMergeStage>(params);
    it = cache_.emplace(key, std::make_shared<const KernelSource>(b.build())).first;
  }
  return *it->second;
}

void MergeStep::record(StepContext& ctx, const MergeProblem& p, const std::vector<MergePart>& parts, const Tensor& o,
                       const std::optional<Tensor>& lse, std::uint32_t level, MergeRecord& out) {
  const auto n = static_cast<std::uint32_t>(parts.size());
  if (n > kPartsPerKernel) {
    // A level of groups, each merged into f32 scratch with its lse; then the merge of those.
    std::vector<MergePart> merged;
    for (std::uint32_t g = 0; g * kPartsPerKernel < n; ++g) {
      const auto begin = parts.begin() + g * kPartsPerKernel;
      const std::vector<MergePart> group(begin, begin + std::min(kPartsPerKernel, n - g * kPartsPerKernel));
      MergePart m;
      m.o = ctx.workspace.scratch(fmt::format("merge_o_l{}_g{}", level, g), DType::F32,
                                  {p.batch, p.nHeads, p.qLen, p.valueDim});
      m.o.layout = Layout::HeadMajor;
      m.lse = ctx.workspace.scratch(fmt::format("merge_lse_l{}_g{}", level, g), DType::F32, {p.batch, p.nHeads, p.qLen});
      record(ctx, p, group, m.o, m.lse, level + 1, out);
      merged.push_back(std::move(m));
    }
    record(ctx, p, merged, o, lse, level + 1, out);
    return;
  }
  const KernelSource& k = kernel(p, n, parts[0].o.dtype, o.dtype, lse.has_value());
  const Rows in = rowsOf(parts[0].o, "parts[0].o"), to = rowsOf(o, "o");
  Arguments a;
  for (std::uint32_t i = 0; i < n; ++i) a.bind(LseMergeStage::partOutput(i), parts[i].o).bind(LseMergeStage::partLse(i), parts[i].lse);
  a.bind("o", o).set("n_heads", p.nHeads).set("q_len", p.qLen);
  a.set("part_stride_b", in.sb).set("part_stride_h", in.sh).set("part_stride_s", in.ss);
  a.set("o_stride_b", to.sb).set("o_stride_h", to.sh).set("o_stride_s", to.ss);
  if (lse) a.bind("lse", *lse);
  // q_len in chunks of kMaxGrid along x; the chunks of each batch follow one another in z.
  const auto chunks = static_cast<std::uint32_t>((p.qLen + kMaxGrid - 1) / kMaxGrid);
  const Grid grid{std::min<std::uint32_t>(p.qLen, kMaxGrid), p.nHeads, p.batch * chunks};
  ctx.dispatcher.dispatch(k, a, grid);
  out.kernels.push_back(k.name);
  out.grids.push_back(grid);
}

MergeRecord MergeStep::run(StepContext& ctx, const MergeCall& call) {
  const MergeProblem p = validate(call);
  MergeRecord out;
  record(ctx, p, call.parts, call.o, call.lse, 0, out);
  return out;
}

std::vector<KernelSource> MergeStep::kernelsFor(const MergeCall& call) {
  // Recorded against a dispatcher that keeps what it is given, on shape-only scratch.
  struct Collect : Dispatcher {
    std::vector<KernelSource> kernels;
    void dispatch(const KernelSource& k, const Arguments&, Grid) override {
      if (std::none_of(kernels.begin(), kernels.end(), [&](const KernelSource& x) { return x.hash == k.hash; })) {
        kernels.push_back(k);
      }
    }
    SubmitResult submit() override { return {}; }
  } collect;
  ShapeWorkspace workspace;
  StepContext ctx{collect, workspace};
  run(ctx, call);
  return collect.kernels;
}

}  // namespace foundry
