// Running kernels in a worker process, so that a GPU fault, a hang or a
// crashing adapter never ends the campaign.
//
// Each harness thread owns one worker (or borrows one of a fixed number:
// limit_workers), started on first use and kept for later cases: its CUDA
// context, device allocations and loaded modules are reused.  A case that
// kills it (signal, sticky CUDA error) or outlives the per-case timeout (the
// worker is then killed) becomes a crash or hang verdict, and the next case
// starts a fresh worker.
//
// CUDA contexts do not survive fork(), so the harness process itself never
// calls CUDA.  attnfuzz starts workers by fork + exec of its own binary
// (`attnfuzz worker --fd N`, use_exec_worker); a program without that
// subcommand (the test binary) gets plain forks, valid because it never
// touches CUDA before forking either.  A forked worker runs the kernel at the
// address the harness passes, so a kernel object must exist (unchanged) when
// the worker is forked: stop_worker() first when it was made later (tests).
#pragma once

#include <cstdint>
#include <string>

#include "harness/case/materialize.h"
#include "harness/run/isolate.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz::gpu {

// Start workers as `executable worker --fd N` from now on.
void use_exec_worker(const std::string& executable);

// At most n workers for all threads together (0: one per thread, the
// default), each lent to one thread for one call.  With n = 1 no second
// CUDA context ever runs beside one that faults: on the H200 a fault beside
// other contexts stalled their context switches (Xid 109) and enough of those
// lost the GPU, while one worker took more faults and kept it
// (reports/production/README.md, runs 9 and 10).  The threads still judge
// their cases in parallel.  Call it while no kernel call is in flight.
void limit_workers(int n);

// Why GPU kernels cannot run here; "" when this thread's worker found a device.
std::string gpu_unavailable_reason();
// The device the worker found, e.g. "NVIDIA H200 (sm_90, 132 SMs)"; "" if none.
std::string gpu_device_name();

// A lost device.  A GPU can vanish under a running process (it fell off the
// bus, the driver was reset, an Xid error took it down): the worker crashes,
// its successor finds no device, and every later GPU case would be
// `unsupported` -- a run that went on would report a matrix of those as if
// all was well.  So the process keeps one record: once any worker of this
// process has found a device, a later worker that finds none or does not
// start marks the device lost, with its reason (the first one stays).
// Campaigns and audits stop on it at their next case boundary.
//
// Why the device was lost; "" while none was.  Thread-safe.
std::string gpu_lost_reason();
// True for the detail of an `unsupported` verdict given because the device
// was lost (gpu_unavailable_reason() says so after the loss): that case did
// not run, and is not counted as run.
bool is_gpu_lost_detail(const std::string& detail);
// What each worker's greeting tells the record (the worker client calls it).
// Public for tests: on a machine without a GPU no worker ever finds one, so
// a test plays "found" and then lets a real worker find none.
void note_worker_greeting(bool found_device, const std::string& why_none);
// For tests only: forget the record (no device seen, none lost).
void reset_gpu_record_for_tests();

struct WorkerRun {
  KernelRun run;              // Ok / Error / Crash / Hang, with the round trip's wall time
  std::string out_of_bounds;  // first damaged guard or padding byte, "" if none
  double kernel_seconds = 0;  // the kernel's own time (device events on GPU)
};

// Runs k on m in this thread's worker; on Ok the outputs are in m.
WorkerRun run_in_worker(const afz_kernel& k, Materialized& m, double timeout_s);

// Runs backward kernel k on p (afz_backward_problem: its forward problem,
// dO, O, LSE in; dQ, dK, dV out) in this thread's worker, with the same
// guards and out-of-bounds checks; on Ok the gradients are in p's buffers.
WorkerRun run_backward_in_worker(const afz_backward_kernel& k, afz_backward_problem& p, double timeout_s);

// This thread's worker process id (a pooled one's under limit_workers),
// -1 when none runs (tests).
int worker_pid();
// Ends this thread's worker and the pooled ones (the next case starts a fresh one).
void stop_worker();
// A detail that says the kernel did not run for want of a GPU: no CUDA
// device here, or the one there was lost (is_gpu_lost_detail).
bool is_no_device_detail(const std::string& detail);

// Worker processes this process has started, all threads together: each
// start costs a CUDA context and the plugins' loading (seconds with libtorch).
int64_t workers_started();

// Starts so far, all threads together, and the seconds harness threads
// waited for a new worker's greeting (fork + exec, CUDA initialised; a
// plugin is loaded by the first case, inside its kernel time).
struct WorkerStarts {
  int64_t started = 0;
  double wait_s = 0;
};
WorkerStarts worker_starts();

}  // namespace afz::gpu
