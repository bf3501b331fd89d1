#include "foundry/Tensor.h"

#include <algorithm>
#include <cstdlib>

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

namespace {

struct Axis {
  std::int64_t stride, dim;
};

/// The dims of 2 or more, by stride (magnitude) ascending.
std::vector<Axis> axes(const Tensor& t) {
  std::vector<Axis> out;
  for (std::size_t i = 0; i < t.dims.size(); ++i) {
    if (t.dims[i] > 1) out.push_back({std::abs(t.strides[i]), t.dims[i]});
  }
  std::sort(out.begin(), out.end(), [](const Axis& x, const Axis& y) { return x.stride < y.stride; });
  return out;
}

/// Each stride past the farthest element the smaller strides reach.
bool nested(const std::vector<Axis>& s) {
  std::int64_t reach = 0;
  for (const Axis& a : s) {
    if (a.stride <= reach) return false;
    reach += a.stride * (a.dim - 1);
  }
  return true;
}

/// Whether `delta` = sum of i_k * stride_k over the first `n` axes with |i_k| < dim_k. The strides nest,
/// so the largest axis leaves the others at most their reach only at the floor or the ceiling of delta
/// over its stride.
bool reaches(const std::vector<Axis>& s, std::size_t n, std::int64_t delta) {
  if (n == 0) return delta == 0;
  std::int64_t inner = 0;
  for (std::size_t j = 0; j + 1 < n; ++j) inner += s[j].stride * (s[j].dim - 1);
  const Axis& a = s[n - 1];
  const std::int64_t q = delta >= 0 ? delta / a.stride : -((-delta + a.stride - 1) / a.stride);
  for (const std::int64_t i : {q, q + 1}) {
    const std::int64_t rest = delta - i * a.stride;
    if (std::abs(i) < a.dim && std::abs(rest) <= inner && reaches(s, n - 1, rest)) return true;
  }
  return false;
}

}  // namespace

bool selfOverlapping(const Tensor& t) {
  if (t.numel() == 0) return false;
  const auto s = axes(t);
  return std::any_of(s.begin(), s.end(), [](const Axis& a) { return a.stride == 0; }) || !nested(s);
}

bool viewsOverlap(const Tensor& a, const Tensor& b) {
  if (!a.buffer || a.buffer != b.buffer || a.numel() == 0 || b.numel() == 0) return false;
  const std::uint64_t a0 = storageBytes(a.dtype, a.offset), b0 = storageBytes(b.dtype, b.offset);
  if (a0 >= b0 + b.spanBytes() || b0 >= a0 + a.spanBytes()) return false;
  const bool sameGrid = a.dtype == b.dtype && a.dtype != DType::Q8_0 && a.dims == b.dims && a.strides == b.strides &&
                        std::all_of(a.strides.begin(), a.strides.end(), [](std::int64_t x) { return x >= 0; });
  if (!sameGrid) return true;
  const auto s = axes(a);
  if (!nested(s)) return true;
  const std::int64_t delta = static_cast<std::int64_t>(b.offset) - static_cast<std::int64_t>(a.offset);
  return reaches(s, s.size(), delta);
}

std::string Tensor::shapeString() const {
  return fmt::format("{}[{}] {}", dtypeName(dtype), fmt::join(dims, ", "), layoutName(layout));
}

}  // namespace foundry
