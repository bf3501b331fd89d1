#include <gmock/gmock.h>

#include "support/TestRuntime.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  foundry::test::installValidationListener();
  const int result = RUN_ALL_TESTS();
  foundry::test::shutdownRuntime();
  return result;
}
