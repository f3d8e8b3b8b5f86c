// `attnfuzz run --kernel K CASE...` and `attnfuzz repro FILE...`.
#include <fmt/core.h>

#include "harness/case/case_file.h"
#include "harness/cli/commands.h"

namespace afz::cli {
namespace {

// Prints one verdict as a block: verdict line, worst element, timing.
void print_outcome(const std::string& file, const afz_kernel& k, const CaseOutcome& o) {
  const Verdict& v = o.verdict;
  fmt::print("{}: {}: {}{}\n", file, k.name, verdict_name(v.cls), v.detail.empty() ? "" : " (" + v.detail + ")");
  if (v.worst.valid) fmt::print("  worst {}\n", v.worst.format());
  if (v.elements)
    fmt::print("  {} elements, {} failing, max error {:.3g} x bound{}\n", v.elements, v.failing, v.max_over_bound,
               v.escalated_rows ? fmt::format(", {} rows escalated to the precise oracle", v.escalated_rows) : "");
  if (is_failure(v.cls)) fmt::print("  repro: attnfuzz repro {}\n", file);
}

struct RunArgs {
  std::string kernel;
  std::vector<std::string> files;
};

// Runs each file against the named kernel (or the one the file records).
int run_files(const Globals& g, const std::vector<std::string>& files, const std::string& kernel_override) {
  const KernelRegistry reg = g.registry();
  const Runner runner(g.run_options());
  bool bad_input = false, failed = false;
  for (const std::string& file : files) {
    std::string err;
    std::optional<Case> c = load_case_file(file, &err);
    if (!c) {
      fmt::print(stderr, "{}\n", err);
      bad_input = true;
      continue;
    }
    const std::string name = kernel_override.empty() ? c->kernel : kernel_override;
    if (name.empty()) {
      fmt::print(stderr, "{}: field 'kernel': the file names no kernel; pass --kernel\n", file);
      bad_input = true;
      continue;
    }
    const afz_kernel* k = reg.find(name);
    if (!k) {
      fmt::print(stderr, "{}: unknown kernel '{}' (see `attnfuzz kernels`)\n", file, name);
      bad_input = true;
      continue;
    }
    try {
      const CaseOutcome o = runner.run(*k, *c);
      print_outcome(file, *k, o);
      failed |= is_failure(o.verdict.cls);
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}: {}\n", file, e.what());
      bad_input = true;
    }
  }
  if (bad_input) return kExitBadInput;
  return failed ? kExitFailuresFound : kExitOk;
}

}  // namespace

Action add_run_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("run", "run case files against a kernel, with each verdict and its worst element");
  auto args = std::make_shared<RunArgs>();
  sub->add_option("--kernel,-k", args->kernel, "kernel name (see `attnfuzz kernels`)")->required();
  sub->add_option("cases", args->files, "case files")->required();
  return [&g, args]() { return run_files(g, args->files, args->kernel); };
}

Action add_repro_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("repro", "re-run saved failing cases (each records its kernel); exit 1 while any fails");
  auto args = std::make_shared<RunArgs>();
  sub->add_option("--kernel,-k", args->kernel, "override the kernel the files record");
  sub->add_option("files", args->files, "case files")->required();
  return [&g, args]() { return run_files(g, args->files, args->kernel); };
}

}  // namespace afz::cli
