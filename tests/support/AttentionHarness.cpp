#include "support/AttentionHarness.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "foundry/Runtime.h"
#include "foundry/vk/VulkanDispatcher.h"
#include "steps/RopeStep.h"
#include "steps/SdpaReferenceStep.h"
#include "support/TestRuntime.h"

namespace foundry::test {

AttentionProblem AttentionCase::problem() const {
  AttentionProblem p;
  p.batch = batch;
  p.nHeads = heads;
  p.nKvHeads = kvHeads;
  p.qLen = qLen;
  p.kvLen = kvLen;
  p.kvCapacity = kvLen + 5;
  p.headDim = headDim;
  p.dtype = dtype;
  p.qLayout = qLayout;
  p.oLayout = oLayout;
  p.causal = causal;
  return p;
}

std::string AttentionCase::name() const {
  return fmt::format("b{}_h{}_kv{}_q{}_kv{}_D{}_{}_{}{}{}{}", batch, heads, kvHeads, qLen, kvLen, headDim,
                     dtypeName(dtype), qLayout == Layout::TokenMajor ? "qtok" : "qhead",
                     oLayout == Layout::TokenMajor ? "_otok" : "", causal ? "" : "_full",
                     magnitude != 1.0f ? fmt::format("_mag{}", static_cast<int>(magnitude)) : "");
}

double relativeBound(DType dtype) { return dtype == DType::F32 ? 1e-4 : 3e-3; }

namespace {

struct Inputs {
  AttentionCall call;
  std::vector<float> q, k, v;  // as the device holds them (rounded to the dtype)
};

std::vector<float> rounded(std::vector<float> x, DType dtype) { return decodeElements(encodeElements(x, dtype), dtype); }

Inputs makeInputs(Runtime& rt, const AttentionCase& c) {
  const AttentionProblem p = c.problem();
  Inputs in;
  const std::size_t qn = std::size_t(p.batch) * p.nHeads * p.qLen * p.headDim;
  const std::size_t kvn = std::size_t(p.batch) * p.nKvHeads * p.kvCapacity * p.headDim;
  in.q = rounded(randomVector(qn, c.seed * 3 + 1, -c.magnitude, c.magnitude), c.dtype);
  in.k = rounded(randomVector(kvn, c.seed * 3 + 2, -c.magnitude, c.magnitude), c.dtype);
  in.v = rounded(randomVector(kvn, c.seed * 3 + 3, -1.0f, 1.0f), c.dtype);
  // Rows past kv_len hold NaN: any kernel that reads them poisons its output.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::uint32_t b = 0; b < p.batch; ++b) {
    for (std::uint32_t h = 0; h < p.nKvHeads; ++h) {
      for (std::uint32_t s = p.kvLen; s < p.kvCapacity; ++s) {
        for (std::uint32_t d = 0; d < p.headDim; ++d) {
          in.k[kvIndex(p, b, h, s) + d] = nan;
          in.v[kvIndex(p, b, h, s) + d] = nan;
        }
      }
    }
  }
  in.call.q = rt.allocate("q", c.dtype, p.qDims(c.qLayout), c.qLayout);
  in.call.k = rt.allocate("k_cache", c.dtype, p.kvDims(), Layout::KvCache);
  in.call.v = rt.allocate("v_cache", c.dtype, p.kvDims(), Layout::KvCache);
  in.call.o = rt.allocate("o", c.dtype, p.qDims(c.oLayout), c.oLayout);
  rt.upload(in.call.q, in.q);
  rt.upload(in.call.k, in.k);
  rt.upload(in.call.v, in.v);
  rt.poison(in.call.o);
  in.call.kvLen = p.kvLen;
  in.call.causal = c.causal;
  return in;
}

AttentionResult finish(Runtime& rt, const AttentionCase& c, Inputs& in, StepRecord record,
                       const std::vector<float>& qForReference) {
  AttentionResult r;
  r.record = std::move(record);
  r.got = rt.download(in.call.o);
  r.want = cpuAttention(c.problem(), qForReference, in.k, in.v);
  r.error = compareOutputs(r.got, r.want);
  return r;
}

}  // namespace

AttentionResult runFlash(const AttentionCase& c, const RuntimeOptions& options, const std::optional<RopeSpec>& rope) {
  Runtime& rt = runtime();
  Inputs in = makeInputs(rt, c);
  std::vector<float> qRef = in.q;
  if (rope) {
    const Tensor table = makeRopeTable(rt, *rope, c.headDim);
    const std::uint32_t position = c.kvLen - 1;
    in.call.rope = FusedRope{*rope, table, position};
    cpuRope(*rope, c.headDim, qRef, std::vector<std::uint32_t>(qRef.size() / c.headDim, position));
  }
  FlashAttentionStep step(rt.info(), rt.snippets(), options);
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  StepRecord record = step.run(ctx, in.call);
  dispatcher->submit();
  return finish(rt, c, in, std::move(record), qRef);
}

AttentionResult runReference(const AttentionCase& c) {
  Runtime& rt = runtime();
  Inputs in = makeInputs(rt, c);
  SdpaReferenceStep step(rt.info(), rt.snippets());
  auto dispatcher = rt.dispatcher();
  DeviceWorkspace workspace(rt);
  StepContext ctx{*dispatcher, workspace, &rt};
  StepRecord record = step.run(ctx, in.call);
  dispatcher->submit();
  return finish(rt, c, in, std::move(record), in.q);
}

std::string describe(const AttentionCase& c, const AttentionResult& r) {
  std::string kernels;
  for (const auto& k : r.record.kernels) kernels += " " + k;
  return fmt::format("{}: max-abs {:.3g}, relative {:.3g} (bound {:.1g}), non-finite {}, worst index {} "
                     "(got {} want {}); plan: {}; kernels:{}",
                     c.name(), r.error.maxAbs, r.error.maxRel, relativeBound(c.dtype), r.error.nonFinite,
                     r.error.worstIndex, r.got.empty() ? 0.0f : r.got[r.error.worstIndex],
                     r.want.empty() ? 0.0 : r.want[r.error.worstIndex], r.record.plan.describe(), kernels);
}

}  // namespace foundry::test
