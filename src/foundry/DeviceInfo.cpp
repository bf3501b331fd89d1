#include "foundry/DeviceInfo.h"

#include <algorithm>
#include <cctype>

namespace foundry {

std::string_view vendorName(Vendor vendor) {
  switch (vendor) {
    case Vendor::Nvidia: return "NVIDIA";
    case Vendor::Amd: return "AMD";
    case Vendor::Intel: return "Intel";
    case Vendor::Apple: return "Apple";
    case Vendor::Arm: return "ARM";
    case Vendor::Qualcomm: return "Qualcomm";
    case Vendor::Mesa: return "Mesa";
    case Vendor::Other: return "other";
  }
  return "other";
}

std::string_view deviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Discrete: return "discrete";
    case DeviceKind::Integrated: return "integrated";
    case DeviceKind::Virtual: return "virtual";
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Other: return "other";
  }
  return "other";
}

std::string_view deviceFamilyName(DeviceFamily family) {
  switch (family) {
    case DeviceFamily::Hopper: return "Hopper";
    case DeviceFamily::Ada: return "Ada";
    case DeviceFamily::Rdna3: return "RDNA3";
    case DeviceFamily::Arc: return "Arc";
    case DeviceFamily::Apple: return "Apple";
    case DeviceFamily::Lavapipe: return "lavapipe";
    case DeviceFamily::Other: return "other";
  }
  return "other";
}

namespace {

/// The words of a device name, lower case: "Intel(R) Arc(tm) A770" -> intel, r, arc, tm, a770.
std::vector<std::string> words(std::string_view name) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

/// A four-digit model number of the series: "4090" and "4060ti" are in series '4'.
bool model(std::string_view word, char series) {
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  return word.size() >= 4 && word[0] == series && std::all_of(word.begin(), word.begin() + 4, digit);
}

template <typename Test>
bool anyWord(const std::vector<std::string>& w, Test test) {
  return std::any_of(w.begin(), w.end(), [&](const std::string& x) { return test(std::string_view(x)); });
}

bool anyWord(const std::vector<std::string>& w, std::initializer_list<std::string_view> names) {
  return anyWord(w, [&](std::string_view x) { return std::find(names.begin(), names.end(), x) != names.end(); });
}

/// `w` has the word `before` directly followed by one that passes `test`.
template <typename Test>
bool after(const std::vector<std::string>& w, std::string_view before, Test test) {
  for (std::size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i] == before && test(std::string_view(w[i + 1]))) return true;
  }
  return false;
}

DeviceFamily nvidiaFamily(const std::vector<std::string>& w) {
  if (anyWord(w, {"h100", "h200", "h800", "h20", "gh200"})) return DeviceFamily::Hopper;
  const bool ada = anyWord(w, {"ada", "l4", "l40", "l40s", "l20"}) ||
                   after(w, "rtx", [](std::string_view x) { return model(x, '4'); });
  return ada ? DeviceFamily::Ada : DeviceFamily::Other;
}

DeviceFamily amdFamily(const std::vector<std::string>& w) {
  const auto rdna3Word = [](std::string_view x) {
    return x == "navi31" || x == "navi32" || x == "navi33" || x.starts_with("gfx11") ||
           (x[0] == 'w' && model(x.substr(1), '7'));  // Radeon PRO W7900
  };
  const bool rdna3 = anyWord(w, rdna3Word) || after(w, "rx", [](std::string_view x) { return model(x, '7'); });
  return rdna3 ? DeviceFamily::Rdna3 : DeviceFamily::Other;
}

}  // namespace

DeviceFamily deviceFamilyFor(Vendor vendor, std::string_view deviceName) {
  const auto w = words(deviceName);
  if (anyWord(w, {"llvmpipe"})) return DeviceFamily::Lavapipe;
  switch (vendor) {
    case Vendor::Nvidia: return nvidiaFamily(w);
    case Vendor::Amd: return amdFamily(w);
    case Vendor::Intel: return anyWord(w, {"arc", "dg2"}) ? DeviceFamily::Arc : DeviceFamily::Other;
    case Vendor::Apple: return DeviceFamily::Apple;
    default: return anyWord(w, {"apple"}) ? DeviceFamily::Apple : DeviceFamily::Other;
  }
}

bool DeviceInfo::hasCoopMat(const CoopMatShape& shape) const {
  return std::find(coopMatShapes.begin(), coopMatShapes.end(), shape) != coopMatShapes.end();
}

std::vector<CoopMatShape> nvidiaCoopMatShapes() {
  return {{16, 16, 16, DType::F16, DType::F32}, {16, 16, 16, DType::F16, DType::F16},
          {16, 8, 16, DType::F16, DType::F32},  {16, 8, 16, DType::F16, DType::F16},
          {16, 8, 8, DType::F16, DType::F32},   {16, 8, 8, DType::F16, DType::F16},
          {16, 8, 32, DType::I8, DType::I32}};
}

CoopMatLayout nvidiaQuadLayout8() { return {{0, 0, 8, 8}, {0, 1, 0, 1}}; }

CoopMatLayout nvidiaQuadLayoutF16() { return {{0, 0, 0, 0, 8, 8, 8, 8}, {0, 1, 8, 9, 0, 1, 8, 9}}; }

CoopMatLayout nvidiaQuadLayout() {
  // Elements 0-3 cover columns 0-7, 4-7 columns 8-15; pairs of elements alternate rows r and r + 8.
  return {{0, 0, 8, 8, 0, 0, 8, 8}, {0, 1, 0, 1, 8, 9, 8, 9}};
}

}  // namespace foundry
