// The worker process that runs kernels for the harness (GPU kernels always;
// see gpu_run.h).  It serves requests on one socket until EOF.
#pragma once

namespace afz::gpu {

// Serves requests on `fd`.  `forked`: this process is a fork of the harness
// without exec, so a request's kernel address is valid here; otherwise
// kernels are looked up by name (and plugin path) in a fresh registry.
// Returns the process exit code.
int serve(int fd, bool forked);

// `attnfuzz worker --fd N` (hidden subcommand): argv from "worker" on.
int worker_main(int argc, char** argv);

}  // namespace afz::gpu
