#include <gmock/gmock.h>

#include "support/TestRuntime.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  foundry::test::installValidationListener();
  return RUN_ALL_TESTS();
}
