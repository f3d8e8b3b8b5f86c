// The worker process that runs kernels for the harness (GPU kernels always;
// see gpu_run.h).  It serves requests on one socket until EOF.
#pragma once

#include <string>
#include <vector>

namespace afz::gpu {

// Serves requests on `fd`.  `forked`: this process is a fork of the harness
// without exec, so a request's kernel address is valid here; otherwise
// kernels are looked up by name (and plugin path) in a fresh registry.
// `preload`: plugin specs loaded before the greeting (a standby worker's
// libtorch is in place when it takes over); one that fails to load is
// loaded again, with its error, by the first request that names it.
// Returns the process exit code.
int serve(int fd, bool forked, const std::vector<std::string>& preload = {});

// `attnfuzz worker --fd N [--preload SPEC]...` (hidden subcommand): argv from "worker" on.
int worker_main(int argc, char** argv);

}  // namespace afz::gpu
