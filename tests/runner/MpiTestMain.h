#pragma once
// The MPI test executable's shared state: its communicator and each rank's runtime, made by its main()
// (MpiTestMain.cpp) before the tests run.
#include "foundry/Runtime.h"
#include "foundry/runner/MpiCommunicator.h"

namespace foundry::test {

extern MpiCommunicator* gComm;
extern Runtime* gRuntime;

}  // namespace foundry::test
