#include "foundry/Tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundry/Error.h"

namespace foundry {

std::string_view layoutName(Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return "contiguous";
    case Layout::HeadMajor: return "head-major";
    case Layout::TokenMajor: return "token-major";
    case Layout::KvCache: return "kv-cache";
  }
  return "?";
}

std::vector<std::int64_t> Tensor::packedStrides(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

Tensor Tensor::describe(std::string name, DType dtype, std::vector<std::int64_t> dims, Layout layout) {
  // Every stride, element count and byte count derived from the dims must fit in 63 bits.
  std::int64_t bytes = static_cast<std::int64_t>(storageBytes(dtype, 1));  // q8_0: a whole block
  for (auto d : dims) {
    if (d < 0) throw UserError(name, fmt::format("dimension {} is negative in [{}]", d, fmt::join(dims, ", ")));
    if (d > 0 && __builtin_mul_overflow(bytes, d, &bytes)) {
      throw UserError(name, fmt::format("shape [{}] of {} has more bytes than fit in 64 bits", fmt::join(dims, ", "),
                                        dtypeName(dtype)));
    }
  }
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.strides = packedStrides(dims);
  t.dims = std::move(dims);
  t.layout = layout;
  return t;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

std::uint64_t Tensor::spanElements() const {
  if (numel() == 0) return 0;
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) last += static_cast<std::uint64_t>((dims[i] - 1) * strides[i]);
  return last + 1;
}

std::string Tensor::shapeString() const {
  return fmt::format("{}[{}] {}", dtypeName(dtype), fmt::join(dims, ", "), layoutName(layout));
}

}  // namespace foundry
