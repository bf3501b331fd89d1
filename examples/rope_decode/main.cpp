// A decode loop as an inference engine runs it: per token the query is rotated (RoPE) and attends
// over the KV cache in one fused kernel, with a sliding window and a modifier of this program's own
// whose GLSL lives in temperature.glsl. Each token's output is checked against Foundry's CPU float64
// reference. Exit code 0 when every token matches.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <foundry/foundry.h>

namespace {

/// Each query head's logits divided by its own temperature: a buffer of one float per head, the GLSL
/// from a file, and the float64 hook the CPU reference runs.
class HeadTemperatureStage : public foundry::AttentionModifier {
 public:
  HeadTemperatureStage(foundry::Tensor temperatures, std::vector<double> values)
      : glsl_(foundry::GlslSource::fromFile(ROPE_DECODE_GLSL)), t_(std::move(temperatures)), values_(std::move(values)) {}
  std::string name() const override { return "HeadTemperatureStage"; }
  std::string key() const override { return {}; }
  void declare(foundry::KernelInterface& k, const foundry::DeviceInfo&) const override {
    k.buffer("head_temperature", foundry::DType::F32, foundry::Access::ReadOnly)
        .snippet(glsl_)
        .hook(foundry::hook::kScore, "head_temperature_score");
  }
  void validate(const foundry::ModifierCall& call) const override {
    if (values_.size() != call.nHeads) throw foundry::UserError("head_temperature", "one value per query head");
  }
  void bind(foundry::Arguments& args, const foundry::ModifierCall&, foundry::Workspace&,
            foundry::TileShape) const override {
    args.bind("head_temperature", t_);
  }
  double score(double s, const foundry::HookAt& at) const override { return s / values_[at.h]; }

 private:
  foundry::GlslSource glsl_;
  foundry::Tensor t_;
  std::vector<double> values_;
};

}  // namespace

int main() try {
  using namespace foundry;
  const Options options = Options::fromEnvironment();
  Runtime rt(options.runtime);
  FusedAttention attention(rt, options.attention);

  // 8 query heads over 2 KV heads (GQA), head_dim 64, f16, a cache of 512 rows; Llama-3 style RoPE.
  AttentionProblem p;
  p.nHeads = 8, p.nKvHeads = 2, p.headDim = 64, p.kvCapacity = 512, p.dtype = DType::F16;
  RopeSpec rope;
  rope.theta = 500000.0;
  const Tensor invFreq = makeRopeTable(rt, rope, p.headDim);

  std::vector<double> temps;
  for (std::uint32_t h = 0; h < p.nHeads; ++h) temps.push_back(0.5 + 0.25 * h);
  const Tensor tempTensor = rt.allocate("head_temperature", DType::F32, {p.nHeads});
  rt.upload(tempTensor, std::vector<float>(temps.begin(), temps.end()));
  const Modifiers modifiers = {std::make_shared<SlidingWindowStage>(255, 0),
                               std::make_shared<HeadTemperatureStage>(tempTensor, temps)};

  AttentionCall call;
  call.k = rt.allocate("k_cache", p.dtype, p.kvDims(), Layout::KvCache);
  call.v = rt.allocate("v_cache", p.dtype, p.vDims(), Layout::KvCache);
  call.q = rt.allocate("q", p.dtype, p.qDims(Layout::HeadMajor), Layout::HeadMajor);
  call.o = rt.allocate("o", p.dtype, p.oDims(Layout::HeadMajor), Layout::HeadMajor);
  call.modifiers = modifiers;
  rt.upload(call.k, randomUniforms(1, 0, static_cast<std::size_t>(call.k.numel())));
  rt.upload(call.v, randomUniforms(2, 0, static_cast<std::size_t>(call.v.numel())));
  const std::vector<float> k = rt.download(call.k), v = rt.download(call.v);

  int failures = 0;
  std::set<std::string> kernels;
  for (std::uint32_t kvLen = 300; kvLen < 304; ++kvLen) {  // four decode tokens
    call.kvLen = kvLen;
    call.rope = FusedRope{rope, invFreq, kvLen - 1};
    rt.upload(call.q, randomUniforms(100 + kvLen, 0, static_cast<std::size_t>(call.q.numel())));
    rt.poison(call.o);  // NaN: an element the kernel does not write shows
    const AttentionRun run = attention.run(call);
    kernels.insert(run.record.kernels.begin(), run.record.kernels.end());

    // The CPU reference: the query rotated on the host, then attention through the same modifiers.
    std::vector<float> q = rt.download(call.q);
    cpuRope(rope, p.headDim, q, std::vector<std::uint32_t>(p.nHeads, kvLen - 1));
    p.kvLen = kvLen;
    p.modifiers = modifiers;
    const ErrorStats e = compareOutputs(rt.download(call.o), cpuAttention(p, q, k, v));
    const bool ok = e.passes(3e-3);
    failures += ok ? 0 : 1;
    std::printf("kv_len %u: %s, %zu dispatches, %.1f us on the GPU, max relative error %.2e %s\n", kvLen,
                run.record.kernels.back().c_str(), run.timings.dispatches.size(), run.timings.totalGpuMicros,
                e.maxRel, ok ? "ok" : "MISMATCH");
  }
  // One plan for the shapes, fitted to each token's KV length; one kernel built for all of them.
  std::printf("4 tokens: %zu plan, %zu kernel; %s\n", attention.plans(), kernels.size(),
              failures ? "FAILED" : "every token matches the CPU");
  return failures || attention.plans() != 1 ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "rope_decode: %s\n", e.what());
  return 2;
}
