#include "foundry/stages/HeadLayoutStage.h"

#include <fmt/format.h>

namespace foundry {

namespace {
constexpr const char* kShapeFields[] = {"n_heads",    "n_kv_heads", "q_len",      "kv_len",     "q_stride_b",
                                        "q_stride_h", "q_stride_s", "o_stride_b", "o_stride_h", "o_stride_s",
                                        "k_stride_b", "k_stride_h", "k_stride_s", "v_stride_b", "v_stride_h",
                                        "v_stride_s"};
}

void HeadLayoutStage::declareShapeFields(KernelInterface& k) {
  for (const char* f : kShapeFields) k.push(f, PushType::U32);
}

void HeadLayoutStage::usesShapeFields(KernelInterface& k) {
  for (const char* f : kShapeFields) k.usesPush(f);
}

void HeadLayoutStage::declareRows(KernelInterface& k, std::uint32_t headDim, std::uint32_t valueDim) {
  k.constant("HEAD_DIM", headDim).constant("VALUE_DIM", valueDim);
}

std::string HeadLayoutStage::rowsKey(std::uint32_t headDim, std::uint32_t valueDim) {
  return valueDim != headDim ? fmt::format("D{}v{}", headDim, valueDim) : fmt::format("D{}", headDim);
}

void HeadLayoutStage::declare(KernelInterface& k, const DeviceInfo&) const {
  declareShapeFields(k);
  k.constant("HEADS_PER_WORKGROUP", heads_);
  for (const char* s : {"batch", "q_head0", "kv_head", "q_base", "o_base"}) k.produces(s, "uint");
  if (grid_ != Grid::Decode) k.produces("q_slot", "uint");
}

void HeadLayoutStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("const uint batch = gl_WorkGroupID.z;");
  if (grid_ == Grid::Decode) {
    w.line("const uint q_head0 = gl_WorkGroupID.y * HEADS_PER_WORKGROUP;");
  } else if (grid_ == Grid::PrefillHeadsFirst) {
    w.line("const uint q_head0 = gl_WorkGroupID.x;");
    w.line("const uint q_slot = gl_WorkGroupID.y;");
  } else {
    w.line("const uint q_head0 = gl_WorkGroupID.y;");
    w.line("const uint q_slot = gl_WorkGroupID.x;");
  }
  // GQA/MQA: query head h reads KV head h / (n_heads / n_kv_heads).
  w.line("const uint kv_head = q_head0 / (pc.n_heads / pc.n_kv_heads);");
  w.line("const uint q_base = batch * pc.q_stride_b + q_head0 * pc.q_stride_h;");
  w.line("const uint o_base = batch * pc.o_stride_b + q_head0 * pc.o_stride_h;");
}

std::string HeadLayoutStage::key() const {
  if (grid_ == Grid::Decode) return fmt::format("g{}", heads_);
  return grid_ == Grid::PrefillHeadsFirst ? "prefill_hf" : "prefill";
}

}  // namespace foundry
