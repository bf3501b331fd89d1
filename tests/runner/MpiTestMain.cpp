// main() of foundry_mpi_tests: every rank runs every test (the collectives need them all), only rank
// 0 prints gtest's results, and a failure on any rank fails the job on rank 0.
#include <gtest/gtest.h>

#include "foundry/runner/ContextParallelDecode.h"
#include "foundry/steps/Options.h"
#include "runner/MpiTestMain.h"

namespace foundry::test {

MpiCommunicator* gComm = nullptr;
Runtime* gRuntime = nullptr;

}  // namespace foundry::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int result = 1;
  {
    foundry::MpiCommunicator comm;
    foundry::test::gComm = &comm;
    if (comm.rank() != 0) delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
    {
      foundry::Runtime rt(foundry::optionsForRank(foundry::Options::fromEnvironment().runtime, comm));
      foundry::test::gRuntime = &rt;
      result = RUN_ALL_TESTS();
      foundry::test::gRuntime = nullptr;
    }
    const double mine = result;
    const auto all = comm.allGather(std::span<const double>(&mine, 1));
    for (double r : all) result |= static_cast<int>(r);
  }
  return result;
}
