// Running a kernel so that its failures become verdicts, not our crash.
//
// In-process runs are fast and fine for the built-in CPU kernels.  Isolated
// runs fork a child that runs the kernel and sends the output bytes back
// through a pipe: a segfault, abort or illegal instruction in the kernel
// kills only the child (crash verdict, with the signal), and a kernel that
// does not finish within the timeout is killed (hang verdict).
#pragma once
#include <string>

#include "harness/case/materialize.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

// Unsupported: the library under test refused the problem at run time
// (AFZ_RUN_UNSUPPORTED): its reason is the message, the verdict `unsupported`.
// Hang: our timeout killed the kernel, or the kernel's plugin returned
// AFZ_RUN_HANG (its own watchdog, e.g. the Python bridge's, gave up).
enum class RunStatus { Ok, Error, Crash, Hang, Unsupported };

struct KernelRun {
  RunStatus status = RunStatus::Ok;
  std::string message;  // one line
  double seconds = 0;
};

KernelRun run_kernel(const afz_kernel& k, Materialized& m, bool isolate, double timeout_s);

}  // namespace afz
