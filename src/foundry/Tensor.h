#pragma once
// A typed view of device memory: dtype, dims, strides (in elements) and a layout tag. Layout is
// declared, never inferred from stride ratios. A Tensor without a buffer describes a shape only (for
// planning and for tests that mock the dispatcher).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "foundry/DType.h"

namespace foundry {

class Buffer;

enum class Layout {
  Contiguous,  ///< row-major, no particular meaning
  HeadMajor,   ///< [batch, heads, tokens, head_dim]
  TokenMajor,  ///< [batch, tokens, heads, head_dim]
  KvCache,     ///< [batch, kv_heads, capacity, head_dim]
};
std::string_view layoutName(Layout layout);

struct Tensor {
  std::shared_ptr<Buffer> buffer;
  DType dtype = DType::F32;
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;  ///< in elements
  Layout layout = Layout::Contiguous;
  std::uint64_t offset = 0;           ///< in elements, from the start of the buffer
  std::string name;
  /// int8 KV caches: the f16 scale of each block of values (foundry/KvQuant.h's scalesShape), in
  /// their own buffer. Runtime::allocate makes it; a view of the values shares it.
  std::shared_ptr<Tensor> scales;

  /// A packed row-major description with no storage.
  static Tensor describe(std::string name, DType dtype, std::vector<std::int64_t> dims,
                         Layout layout = Layout::Contiguous);
  static std::vector<std::int64_t> packedStrides(const std::vector<std::int64_t>& dims);

  std::int64_t numel() const;
  std::size_t rank() const { return dims.size(); }
  std::int64_t dim(std::size_t i) const { return dims.at(i); }
  std::int64_t stride(std::size_t i) const { return strides.at(i); }
  /// Elements from `offset` to one past the last addressed element.
  std::uint64_t spanElements() const;
  std::uint64_t spanBytes() const { return storageBytes(dtype, spanElements()); }
  bool lastDimContiguous() const { return !strides.empty() && strides.back() == 1; }
  bool packed() const { return strides == packedStrides(dims); }
  std::string shapeString() const;  ///< "f16[1, 32, 7, 128] head-major"
};

/// Whether two positions of `t` can name one element: a stride of 0 over a dim of 2 or more, or strides
/// that do not nest (each dim's stride past every element the smaller strides reach). A layout whose
/// strides do not nest counts as overlapping even where its elements happen to be apart.
bool selfOverlapping(const Tensor& t);

/// Whether `a` and `b` share an element: never in different buffers; exact where both have one dtype,
/// the same dims and the same nested, non-negative strides (views interleaved in one buffer, such as the
/// column halves of a fused activation or K and V pages alternating in one pool); else whether their
/// byte ranges meet.
bool viewsOverlap(const Tensor& a, const Tensor& b);

}  // namespace foundry
