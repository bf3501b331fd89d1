#pragma once
// What a step records into: a dispatcher and a workspace, and for debug comparisons a runtime.
#include "foundry/Dispatcher.h"
#include "foundry/Workspace.h"

namespace foundry {

class Runtime;

struct StepContext {
  Dispatcher& dispatcher;
  Workspace& workspace;
  Runtime* runtime = nullptr;  ///< set when the step may submit and read back (online comparison)
};

}  // namespace foundry
