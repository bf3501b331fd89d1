#pragma once
// A glslc run as a separate process, for the kernels Debian 12's shaderc cannot compile
// (GL_NV_cooperative_matrix2 and GL_KHR_cooperative_matrix need glslang 15). Which glslc is a knob
// (FOUNDRY_GLSLC; scripts/newer-compilers.sh makes one from Debian 13's packages); what it can compile
// is probed once, when it is first given, by compiling a small workgroup-scope kernel.
#include <cstdint>
#include <string>
#include <vector>

namespace foundry {

class ExternalGlslc {
 public:
  /// `command`: the glslc to run (a path). Runs `command --version` and the probe; never throws: a
  /// glslc that cannot run has no capabilities, and says why in problem().
  explicit ExternalGlslc(std::string command);

  const std::string& command() const { return command_; }
  /// The first line of `glslc --version` ("shaderc 2025.2-1"), or "" where it did not run.
  const std::string& version() const { return version_; }
  /// It compiles GL_NV_cooperative_matrix2 kernels (workgroup-scope matrices, reductions, element
  /// operations) for Vulkan 1.3.
  bool coopMat2() const { return coopMat2_; }
  /// Why coopMat2() is false, or "".
  const std::string& problem() const { return problem_; }
  /// It compiles those kernels with bf16 operands too (GL_EXT_bfloat16: glslang 15.3 or newer; Debian
  /// 13's 15.1 does not, Debian 14's does).
  bool bf16() const { return bf16_; }
  /// Why bf16() is false where coopMat2() is true, or "".
  const std::string& bf16Problem() const { return bf16Problem_; }

  /// Compiles compute-shader GLSL to SPIR-V (Vulkan 1.3). Throws DeviceError with glslc's message,
  /// its file name `name`.comp.
  std::vector<std::uint32_t> compile(const std::string& glsl, const std::string& name) const;
  /// spirv-val's complaint about `spirv` (Vulkan 1.3), "" where it accepts it or where no spirv-val sits
  /// beside this glslc.
  std::string rejects(const std::vector<std::uint32_t>& spirv) const;

 private:
  std::string command_, version_, problem_, bf16Problem_;
  bool coopMat2_ = false, bf16_ = false;
};

}  // namespace foundry
