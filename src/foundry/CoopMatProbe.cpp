#include "foundry/CoopMatProbe.h"

#include <cstring>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/KernelBuilder.h"
#include "foundry/Runtime.h"
#include "foundry/vk/Buffer.h"
#include "foundry/vk/VulkanDispatcher.h"

namespace foundry {

namespace {

constexpr std::uint32_t kMaxElements = 16;

class CoopMatProbeStage : public Stage {
 public:
  std::string name() const override { return "CoopMatProbeStage"; }
  void declare(KernelInterface& k, const DeviceInfo&) const override {
    k.buffer("probe_out", DType::F32, Access::WriteOnly, "uint").shared("probe_src", "float", 256, 4);
    k.shared("probe_src16", "uint", 128, 4);  // the same 256 values in f16 pairs
    k.extension("GL_KHR_memory_scope_semantics").extension("GL_NV_cooperative_matrix");
    k.extension("GL_KHR_shader_subgroup_basic").extension("GL_EXT_shader_explicit_arithmetic_types_float16");
  }
  // 16x16, then (after SUBGROUP_SIZE * kMaxElements + 1 words) 16x8, then 16x16 f16 (flat indices up to
  // 255 are exact in f16): each element's flat index, and the element count last.
  void emit(GlslWriter& w, const DeviceInfo&) const override {
    w.line("for (uint i = gl_LocalInvocationIndex; i < 256u; i += WORKGROUP_SIZE) probe_src[i] = float(i);");
    w.line("for (uint i = gl_LocalInvocationIndex; i < 128u; i += WORKGROUP_SIZE) probe_src16[i] = "
           "packHalf2x16(vec2(2u * i, 2u * i + 1u));");
    w.line("barrier();");
    w.line("const uint lane = gl_SubgroupInvocationID, half_at = SUBGROUP_SIZE * {}u + 1u;", kMaxElements);
    w.line("fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> m;");
    w.line("coopMatLoadNV(m, probe_src, 0u, 16u, false);");
    w.line("for (uint e = 0u; e < m.length() && e < {}u; ++e) probe_out[lane * {}u + e] = uint(m[e]);", kMaxElements,
           kMaxElements);
    w.line("if (lane == 0u) probe_out[half_at - 1u] = uint(m.length());");
    w.line("fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> h;");
    w.line("coopMatLoadNV(h, probe_src, 0u, 8u, false);");
    w.line("for (uint e = 0u; e < h.length() && e < {}u; ++e) probe_out[half_at + lane * {}u + e] = uint(h[e]);",
           kMaxElements, kMaxElements);
    w.line("if (lane == 0u) probe_out[2u * half_at - 1u] = uint(h.length());");
    w.line("fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> f;");
    w.line("coopMatLoadNV(f, probe_src16, 0u, 8u, false);");
    w.line("for (uint e = 0u; e < f.length() && e < {}u; ++e) probe_out[2u * half_at + lane * {}u + e] = uint(f[e]);",
           kMaxElements, kMaxElements);
    w.line("if (lane == 0u) probe_out[3u * half_at - 1u] = uint(f.length());");
  }
  std::string key() const override { return ""; }
};

}  // namespace

CoopMatLayout quadLayoutFrom(const CoopMatProbeResult& probe, std::uint32_t columns, bool f16) {
  const bool narrow = columns == 8;
  const std::uint32_t n = f16 ? probe.elementsF16 : narrow ? probe.elements8 : probe.elements;
  const std::vector<std::uint32_t>& flat = f16 ? probe.flatF16 : narrow ? probe.flat8 : probe.flat;
  if (n == 0 || n > kMaxElements || probe.subgroupSize < 4 || flat.size() != probe.subgroupSize * n) return {};
  CoopMatLayout layout;
  for (std::uint32_t e = 0; e < n; ++e) {
    layout.rowOf.push_back(static_cast<std::uint8_t>(flat[e] / columns));
    layout.colOf.push_back(static_cast<std::uint8_t>(flat[e] % columns));
  }
  for (std::uint32_t lane = 0; lane < probe.subgroupSize; ++lane) {
    for (std::uint32_t e = 0; e < n; ++e) {
      const std::uint32_t row = layout.rowOf[e] + lane / 4, col = layout.colOf[e] + 2 * (lane % 4);
      if (row >= 16 || col >= columns || flat[lane * n + e] != row * columns + col) return {};
    }
  }
  return layout;
}

KernelSource coopMatProbeKernel(const DeviceInfo& device, std::shared_ptr<const SnippetLibrary> snippets) {
  return KernelBuilder(device, std::move(snippets)).workgroup(device.subgroupSize).emplace<CoopMatProbeStage>().build();
}

CoopMatProbeResult runCoopMatProbe(Runtime& rt) {
  const std::uint32_t sg = rt.info().subgroupSize;
  const KernelSource k = coopMatProbeKernel(rt.info(), rt.snippets());
  const std::uint32_t halfAt = sg * kMaxElements + 1;
  const Tensor out = rt.allocate("coopmat_probe", DType::F32, {3 * halfAt});
  out.buffer->fill(0xffffffffu);
  auto d = rt.dispatcher();
  d->dispatch(k, Arguments().bind("probe_out", out), {1});
  d->submit();
  std::vector<std::byte> bytes(out.spanBytes());
  out.buffer->download(bytes);
  std::vector<std::uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  CoopMatProbeResult r;
  r.subgroupSize = sg;
  r.elements = words[halfAt - 1];
  r.elements8 = words[2 * halfAt - 1];
  r.elementsF16 = words.back();
  if (r.elements == 0 || r.elements > kMaxElements) return r;
  for (std::uint32_t lane = 0; lane < sg; ++lane) {
    for (std::uint32_t e = 0; e < r.elements; ++e) r.flat.push_back(words[lane * kMaxElements + e]);
  }
  if (r.elements8 == 0 || r.elements8 > kMaxElements) return r;
  for (std::uint32_t lane = 0; lane < sg; ++lane) {
    for (std::uint32_t e = 0; e < r.elements8; ++e) r.flat8.push_back(words[halfAt + lane * kMaxElements + e]);
  }
  if (r.elementsF16 == 0 || r.elementsF16 > kMaxElements) return r;
  for (std::uint32_t lane = 0; lane < sg; ++lane) {
    for (std::uint32_t e = 0; e < r.elementsF16; ++e) r.flatF16.push_back(words[2 * halfAt + lane * kMaxElements + e]);
  }
  return r;
}

}  // namespace foundry
