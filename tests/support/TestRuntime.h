#pragma once
// Shared fixtures for tests that need a device: one Runtime per test process (on lavapipe in CI),
// created from the environment, with Khronos validation when FOUNDRY_VALIDATION=1. A listener fails
// any test during which the validation layer reported an error.
#include <cstdint>
#include <random>
#include <vector>

#include "foundry/Runtime.h"

namespace foundry::test {

/// The process-wide runtime (created on first use).
Runtime& runtime();
/// True once runtime() has been created.
bool runtimeCreated();
/// Destroys the runtime. main() calls it before returning: Vulkan objects must not outlive the
/// driver's own teardown at exit.
void shutdownRuntime();

/// A kernel of test stages (support/TestStages.h) built on `rt`: dst = scale * src over `count` f32
/// elements, 64 a workgroup (bindings src, dst; push constants count, scale).
KernelSource scaleKernel(Runtime& rt);

/// Uniform values in [lo, hi) from a seeded generator; never all zeros.
std::vector<float> randomVector(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f);

/// Number of validation errors reported so far (0 without the layer).
std::uint64_t validationErrors();
/// Tells the listener that the errors reported so far in this test were provoked on purpose.
void acknowledgeValidationErrors();

/// Installs the validation listener; called from the tests' main().
void installValidationListener();

}  // namespace foundry::test
