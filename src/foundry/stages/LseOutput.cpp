#include "foundry/stages/LseOutput.h"

#include <fmt/format.h>

namespace foundry::lse_detail {

void declare(KernelInterface& k) {
  k.buffer("lse", DType::F32, Access::WriteOnly);
  k.usesPush("n_heads").usesPush("q_len");
}

std::string row(const std::string& batch, const std::string& head, const std::string& token) {
  return fmt::format("({} * pc.n_heads + {}) * pc.q_len + {}", batch, head, token);
}

std::string store(const std::string& batch, const std::string& head, const std::string& token,
                  const std::string& value) {
  return fmt::format("lse[{}] = {};", row(batch, head, token), value);
}

std::string storeRow(const std::string& batch, const std::string& head, const std::string& token, const std::string& m,
                     const std::string& l) {
  return store(batch, head, token, fmt::format("fa_lse({}, {}, {}, {})", m, l, batch, head));
}

}  // namespace foundry::lse_detail
