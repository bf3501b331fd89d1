#include "foundry/stages/modifiers/MaskStage.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundry/Error.h"
#include "foundry/stages/AttentionHooks.h"

namespace foundry {

namespace {

const char* bufferName(MaskKind kind) { return kind == MaskKind::Bits ? "mask_bits" : "mask_add"; }
std::uint32_t ceilDiv(std::uint32_t a, std::uint32_t b) { return (a + b - 1) / b; }

}  // namespace

std::shared_ptr<MaskStage> MaskStage::additive(Tensor mask, std::vector<float> host) {
  std::shared_ptr<MaskStage> m(new MaskStage(std::move(mask), MaskKind::Additive));
  m->additive_ = std::move(host);
  return m;
}

std::shared_ptr<MaskStage> MaskStage::bits(Tensor mask, std::vector<std::uint32_t> host) {
  std::shared_ptr<MaskStage> m(new MaskStage(std::move(mask), MaskKind::Bits));
  m->bits_ = std::move(host);
  return m;
}

std::string MaskStage::key() const {
  return kind_ == MaskKind::Bits ? "bits" : fmt::format("add_{}", dtypeName(mask_.dtype));
}

std::string MaskStage::describe() const {
  return fmt::format("{} mask {}", kind_ == MaskKind::Bits ? "bit" : "additive", mask_.shapeString());
}

void MaskStage::declareAccess(KernelInterface& k, MaskKind kind, DType dtype) {
  k.buffer(bufferName(kind), kind == MaskKind::Bits ? DType::U32 : dtype, Access::ReadOnly);
  k.define("MASK_BITS", kind == MaskKind::Bits ? "1" : "0");
  for (const char* f : {"mask_stride_b", "mask_stride_h", "mask_stride_q", "mask_tile_q", "mask_tile_k"}) {
    k.push(f, PushType::U32);
  }
}

void MaskStage::declare(KernelInterface& k, const DeviceInfo&) const {
  declareAccess(k, kind_, mask_.dtype);
  for (const char* f : {"mask_blocks_stride_b", "mask_blocks_stride_h", "mask_k_tiles"}) k.push(f, PushType::U32);
  k.buffer("mask_blocks", DType::U32, Access::ReadOnly);
  k.snippet("modifiers/mask.glsl").usesPush("q_len");
  k.hook(hook::kVisible, "mask_visible").hook(hook::kKeyRange, "mask_key_range");
  if (kind_ == MaskKind::Additive) k.hook(hook::kScore, "mask_score");
  k.hook(hook::kTileVisible, "mask_tile_visible", /*hint=*/true);
}

void MaskStage::validate(const ModifierCall& call) const {
  const bool bitsKind = kind_ == MaskKind::Bits;
  if (bitsKind ? mask_.dtype != DType::U32 : (mask_.dtype != DType::F16 && mask_.dtype != DType::F32)) {
    throw UserError("mask", fmt::format("a{} mask holds {}, got {}", bitsKind ? " bit" : "n additive",
                                        bitsKind ? "u32 words" : "f16 or f32 logits", dtypeName(mask_.dtype)));
  }
  const std::uint32_t columns = bitsKind ? ceilDiv(call.kvLen, 32) : call.kvLen;
  if (mask_.rank() != 4 || (mask_.dim(0) != 1 && mask_.dim(0) != call.batch) ||
      (mask_.dim(1) != 1 && mask_.dim(1) != call.nHeads) || mask_.dim(2) != call.qLen || mask_.dim(3) < columns ||
      !mask_.lastDimContiguous()) {
    throw UserError("mask", fmt::format("expected [1 or batch {}, 1 or heads {}, q_len {}, at least {} {}] with the "
                                        "last dimension contiguous, got {}", call.batch, call.nHeads, call.qLen, columns,
                                        bitsKind ? "words" : "keys", mask_.shapeString()));
  }
  const std::size_t hostSize = bitsKind ? bits_.size() : additive_.size();
  if (static_cast<std::int64_t>(hostSize) != mask_.numel() || !mask_.packed()) {
    throw UserError("mask", fmt::format("the host copy holds {} values for a packed mask of {}", hostSize,
                                        mask_.shapeString()));
  }
}

void MaskStage::setAccess(Arguments& args) const {
  args.bind(bufferName(kind_), mask_);
  args.set("mask_stride_b", mask_.dim(0) == 1 ? 0u : std::uint32_t(mask_.stride(0)));
  args.set("mask_stride_h", mask_.dim(1) == 1 ? 0u : std::uint32_t(mask_.stride(1)));
  args.set("mask_stride_q", std::uint32_t(mask_.stride(2)));
}

Tensor MaskStage::blocks(const ModifierCall& call, Workspace& ws, TileShape tile) const {
  // A kernel without tiles never reads the map (it does not host fa_tile_visible), but binds one.
  if (!tile.tiled()) return ws.scratch("mask_blocks_unused", DType::U32, {1, 1, 1, 1});
  const std::int64_t qTiles = ceilDiv(call.qLen, tile.queryRows), kTiles = ceilDiv(call.kvLen, tile.keys);
  return ws.scratch("mask_blocks", DType::U32, {mask_.dim(0), mask_.dim(1), qTiles, kTiles});
}

void MaskStage::bind(Arguments& args, const ModifierCall& call, Workspace& ws, TileShape tile) const {
  setAccess(args);
  const Tensor b = blocks(call, ws, tile);
  args.bind("mask_blocks", b);
  args.set("mask_tile_q", std::max(tile.queryRows, 1u)).set("mask_tile_k", std::max(tile.keys, 1u));
  args.set("mask_blocks_stride_b", mask_.dim(0) == 1 ? 0u : std::uint32_t(b.stride(0)));
  args.set("mask_blocks_stride_h", mask_.dim(1) == 1 ? 0u : std::uint32_t(b.stride(1)));
  args.set("mask_k_tiles", std::uint32_t(b.dim(3)));
}

std::vector<ModifierPass> MaskStage::passes(const ModifierCall& call, Workspace& ws, TileShape tile) const {
  if (!tile.tiled()) return {};
  const Tensor b = blocks(call, ws, tile);
  ModifierPass pass;
  pass.stage = std::make_shared<MaskBlockMapStage>(kind_, mask_.dtype);
  pass.workgroup = 64;
  pass.grid = {std::uint32_t(b.dim(3)), std::uint32_t(b.dim(2)), std::uint32_t(b.dim(0) * b.dim(1))};
  setAccess(pass.args);
  pass.args.bind("mask_blocks", b);
  pass.args.set("mask_tile_q", tile.queryRows).set("mask_tile_k", tile.keys).set("q_len", call.qLen);
  pass.args.set("kv_len", call.kvLen).set("mask_heads", std::uint32_t(b.dim(1)));
  pass.args.set("mask_q_tiles", std::uint32_t(b.dim(2))).set("mask_k_tiles", std::uint32_t(b.dim(3)));
  return {pass};
}

std::size_t MaskStage::row(const HookAt& at) const {
  const std::size_t b = mask_.dim(0) == 1 ? 0 : at.b, h = mask_.dim(1) == 1 ? 0 : at.h;
  return ((b * mask_.dim(1) + h) * mask_.dim(2) + at.queryIndex()) * mask_.dim(3);
}

bool MaskStage::visible(const HookAt& at) const {
  if (kind_ == MaskKind::Bits) return (bits_.at(row(at) + at.k / 32) >> (at.k % 32)) & 1u;
  return additive_.at(row(at) + at.k) > -kHalfMax;
}

double MaskStage::score(double s, const HookAt& at) const {
  if (kind_ == MaskKind::Bits || !visible(at)) return s;
  return s + additive_.at(row(at) + at.k);
}

std::string MaskBlockMapStage::key() const {
  return kind_ == MaskKind::Bits ? "bits" : fmt::format("add_{}", dtypeName(dtype_));
}

void MaskBlockMapStage::declare(KernelInterface& k, const DeviceInfo&) const {
  MaskStage::declareAccess(k, kind_, dtype_);
  for (const char* f : {"q_len", "kv_len", "mask_heads", "mask_q_tiles", "mask_k_tiles"}) k.push(f, PushType::U32);
  k.buffer("mask_blocks", DType::U32, Access::WriteOnly).shared("mask_any", "uint", 1, 4);
  k.snippet("modifiers/mask_block_map.glsl");
}

void MaskBlockMapStage::emit(GlslWriter& w, const DeviceInfo&) const {
  w.line("mask_block_map(gl_WorkGroupID.z / pc.mask_heads, gl_WorkGroupID.z % pc.mask_heads, gl_WorkGroupID.y, "
         "gl_WorkGroupID.x);");
}

}  // namespace foundry
