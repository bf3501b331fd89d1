// `foundry run` under an address-space limit (ulimit -v) with a config that needs more than it: the
// run must stop before allocating, with one clear line and exit 4, within the time a process takes to
// start and open the device (about a second on lavapipe, more on a loaded machine) — not allocate until
// the kernel or the allocator ends it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/Subprocess.h"
#include "support/TempDir.h"

namespace foundry {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FOUNDRY_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FOUNDRY_TEST_ASAN 1
#endif

TEST(MemoryLimit, RunNeedingMoreThanTheAddressSpaceLimitFailsAtOnce) {
#ifdef FOUNDRY_TEST_ASAN
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow address space: no ASan process starts under "
                  "ulimit -v";
#endif
  test::TempDir dir;
  // 1.5 GiB of buffers: within lavapipe's 2 GiB heap, beyond a 1 GiB address space.
  std::ofstream(dir.path() / "model.json") << R"({"name": "Big", "source": "test/big",
    "attention": {"layers": 4, "n_heads": 8, "n_kv_heads": 8, "head_dim": 128, "max_context": 65536},
    "run": {"batch": 1, "prompt_len": 65528, "decode_tokens": 8, "dtype": "f16", "check": false}})";
  test::ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "ulimit -v 1048576 && exec \"$0\" run model.json", FOUNDRY_EXECUTABLE};
  spec.env["FOUNDRY_CACHE_DIR"] = (dir.path() / ".cache").string();
  spec.workDir = dir.path();
  spec.timeoutSeconds = 60;
  const test::ProcessResult r = test::runProcess(spec);
  ASSERT_FALSE(r.timedOut) << r.summary();
  EXPECT_EQ(r.exitCode, 4) << r.summary();
  const auto lines = r.errLines();
  ASSERT_EQ(lines.size(), 1u) << r.summary();
  EXPECT_THAT(lines[0], StartsWith("foundry: device error: this run needs 1610612736 bytes (1.50 GiB) of host memory"));
  EXPECT_THAT(lines[0], HasSubstr("RLIMIT_AS (ulimit -v) 1.00 GiB"));
  EXPECT_THAT(lines[0], HasSubstr("lower --batch (/run/batch)"));
  // The bound is the start-up's, with room for a loaded 2-core machine (1.17 s seen under three test
  // processes); filling 1.5 GiB and failing there takes far longer, and ends with another line.
  EXPECT_LT(r.seconds, 5.0) << r.summary();
}

}  // namespace
}  // namespace foundry
