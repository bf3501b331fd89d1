#pragma once
// Shape-only attention calls for planning and mock tests: tensors with dims, strides and layout tags
// but no buffers, so no device is needed.
#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "foundry/KvQuant.h"
#include "foundry/steps/AttentionCall.h"

namespace foundry::test {

struct CallShape {
  std::uint32_t batch = 1;
  std::uint32_t nHeads = 32;
  std::uint32_t nKvHeads = 8;
  std::uint32_t qLen = 1;
  std::uint32_t kvLen = 1024;
  std::uint32_t capacity = 0;  ///< 0: kvLen
  std::uint32_t headDim = 128;
  DType dtype = DType::F16;
  Layout qLayout = Layout::HeadMajor;  ///< Q and O
  bool causal = true;
  bool lse = false;  ///< the call returns each row's log-sum-exp in an f32 tensor "lse"

  std::string str() const {
    return fmt::format("B{}_H{}_KV{}_q{}_kv{}_D{}_{}{}{}", batch, nHeads, nKvHeads, qLen, kvLen, headDim,
                       dtypeName(dtype), qLayout == Layout::TokenMajor ? "_tok" : "", lse ? "_lse" : "");
  }
};

inline std::vector<std::int64_t> qDimsOf(const CallShape& s) {
  if (s.qLayout == Layout::TokenMajor) return {s.batch, s.qLen, s.nHeads, s.headDim};
  return {s.batch, s.nHeads, s.qLen, s.headDim};
}

/// A decode call (q_len 1) of this size.
inline CallShape decodeShape(std::uint32_t batch, std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t kvLen,
                             std::uint32_t headDim = 128) {
  CallShape s;
  s.batch = batch;
  s.nHeads = heads;
  s.nKvHeads = kvHeads;
  s.qLen = 1;
  s.kvLen = kvLen;
  s.headDim = headDim;
  return s;
}

/// A prefill call (batch 1) of this size.
inline CallShape prefillShape(std::uint32_t heads, std::uint32_t kvHeads, std::uint32_t qLen, std::uint32_t kvLen,
                              std::uint32_t headDim = 128, DType dtype = DType::F16) {
  CallShape s = decodeShape(1, heads, kvHeads, kvLen, headDim);
  s.qLen = qLen;
  s.dtype = dtype;
  return s;
}

/// Tensors named "q", "k_cache", "v_cache" and "out".
inline AttentionCall shapeCall(const CallShape& s) {
  const std::int64_t capacity = s.capacity ? s.capacity : s.kvLen;
  AttentionCall c;
  c.q = Tensor::describe("q", s.dtype, qDimsOf(s), s.qLayout);
  c.o = Tensor::describe("out", s.dtype, qDimsOf(s), s.qLayout);
  c.k = Tensor::describe("k_cache", s.dtype, {s.batch, s.nKvHeads, capacity, s.headDim}, Layout::KvCache);
  c.v = Tensor::describe("v_cache", s.dtype, {s.batch, s.nKvHeads, capacity, s.headDim}, Layout::KvCache);
  c.kvLen = s.kvLen;
  c.causal = s.causal;
  if (s.lse) c.lse = Tensor::describe("lse", DType::F32, {s.batch, s.nHeads, s.qLen});
  return c;
}

/// Makes a call's caches paged (describePagedCaches): pages in reverse order by default.
inline AttentionCall withPages(AttentionCall c, std::uint32_t pageSize, std::uint32_t poolPages = 0,
                               std::vector<std::uint32_t> table = {}, std::uint32_t maxPages = 0) {
  return describePagedCaches(std::move(c), pageSize, poolPages, std::move(table), maxPages);
}

/// Adds fused RoPE (rotate-half over all of head_dim) at `position` to a decode call.
inline AttentionCall withRope(AttentionCall c, std::uint32_t headDim, std::uint32_t position) {
  FusedRope r;
  r.invFreq = Tensor::describe("rope_inv_freq", DType::F32, {headDim / 2});
  r.position = position;
  c.rope = r;
  return c;
}

}  // namespace foundry::test
