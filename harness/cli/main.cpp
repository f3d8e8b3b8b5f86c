// attnfuzz: finds correctness bugs in attention kernels.
#include <fmt/core.h>

#include <exception>

#include "harness/cli/commands.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/run/gpu/worker.h"

namespace afz::cli {

KernelRegistry Globals::registry() const {
  KernelRegistry r = KernelRegistry::with_builtins();
  for (const std::string& lib : kernel_libs) {
    std::string err;
    if (!r.load_library(lib, &err)) throw BadInput{err};
  }
  return r;
}

RunOptions Globals::run_options() const {
  RunOptions o;
  auto tier = parse_oracle_tier(oracle);
  if (!tier) throw BadInput{"--oracle: unknown tier '" + oracle + "' (auto, fast, gpu, boost, mpfr)"};
  o.oracle = *tier;
  o.mpfr_bits = mpfr_bits;
  o.isolate = isolate;
  o.check_determinism = determinism;
  o.timeout_s = timeout_s;
  o.sampling = sampling;
  return o;
}

}  // namespace afz::cli

int main(int argc, char** argv) {
  using namespace afz::cli;
  // The GPU worker is this binary started again (harness/run/gpu/gpu_run.h);
  // its subcommand is internal, so it is handled before the CLI and hidden.
  if (argc >= 2 && std::string_view(argv[1]) == "worker") return afz::gpu::worker_main(argc - 1, argv + 1);
  afz::gpu::use_exec_worker("/proc/self/exe");
  CLI::App app{"attnfuzz: finds correctness bugs in attention kernels"};
  app.require_subcommand(1);
  Globals g;
  app.add_option("--kernel-lib", g.kernel_libs, "load kernels from a plugin shared library (repeatable)");
  app.add_option("--oracle", g.oracle, "oracle tier: auto (fast + escalation), fast, gpu (the fast tier on the GPU + escalation), boost, mpfr")->capture_default_str();
  app.add_option("--mpfr-bits", g.mpfr_bits, "MPFR precision in bits")->capture_default_str()->check(CLI::Range(64, 4096));
  app.add_flag("--isolate", g.isolate, "run each kernel call in a child process (crash and hang verdicts)");
  app.add_flag("--determinism", g.determinism, "run each case twice and require identical bits");
  app.add_option("--timeout", g.timeout_s, "seconds per kernel call before a hang verdict (with --isolate)")
      ->capture_default_str();
  app.add_option("--gpu-workers", g.gpu_workers,
                 "at most N GPU worker processes, shared by the jobs (0: one per job); 1 keeps a faulting kernel's "
                 "CUDA context alone on the GPU while the jobs still judge in parallel")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--check-rows", g.sampling.max_rows,
                 "judge at most this many query rows per case: every sequence and tile edge plus a seeded sample "
                 "(coverage stated in the verdict); 0 = every row")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--row-tile", g.sampling.tile_rows, "query-tile height whose edge rows --check-rows always keeps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--sample-seed", g.sampling.seed, "seed of --check-rows' sample")->capture_default_str();

  std::vector<std::pair<CLI::App*, Action>> commands;
  // get_subcommands() without a filter lists only the *parsed* ones (empty
  // here); the filter form lists all, the newest last.
  auto track = [&](Action a) { commands.emplace_back(app.get_subcommands([](CLI::App*) { return true; }).back(), std::move(a)); };
  track(add_kernels_command(app, g));
  track(add_run_command(app, g));
  track(add_repro_command(app, g));
  track(add_fuzz_command(app, g));
  track(add_replay_command(app, g));
  track(add_report_command(app, g));
  track(add_mutants_command(app, g));
  track(add_audit_command(app, g));
  track(add_conventions_command(app, g));
  track(add_bench_command(app, g));
  for (int n = 0; n < argc; ++n) g.command_line += (n ? " " : "") + std::string(argv[n]);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  afz::gpu::limit_workers(g.gpu_workers);
  try {
    for (auto& [sub, action] : commands)
      if (sub->parsed()) return action();
  } catch (const BadInput& e) {
    fmt::print(stderr, "attnfuzz: {}\n", e.message);
    return kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "attnfuzz: {}\n", e.what());
    return kExitBadInput;
  }
  return kExitBadInput;
}
