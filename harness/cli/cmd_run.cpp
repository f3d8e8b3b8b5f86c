// `attnfuzz run --kernel K CASE...` and `attnfuzz repro FILE...`, through
// the forward pass, the backward pass (--pass bwd: dQ, dK, dV from dO) or
// both; a saved failure records its pass, so `repro` needs no flag.
#include <fmt/core.h>

#include "harness/case/case_file.h"
#include "harness/cli/commands.h"
#include "harness/run/backward_runner.h"

namespace afz::cli {
namespace {

// Prints one verdict as a block: verdict line, worst element, timing.
// `label` is the kernel's name, with " [bwd]" for a backward verdict;
// `repro_flags` what a repro of this file needs beyond the file itself.
void print_outcome(const std::string& file, const std::string& label, const Verdict& v,
                   const std::string& repro_flags) {
  fmt::print("{}: {}: {}{}\n", file, label, verdict_name(v.cls), v.detail.empty() ? "" : " (" + v.detail + ")");
  if (v.worst.valid) fmt::print("  worst {}\n", v.worst.format());
  if (v.elements)
    fmt::print("  {} elements, {} failing, max error {:.3g} x bound{}\n", v.elements, v.failing, v.max_over_bound,
               v.escalated_rows ? fmt::format(", {} rows escalated to the precise oracle", v.escalated_rows) : "");
  if (is_failure(v.cls)) fmt::print("  repro: attnfuzz repro {}{}\n", repro_flags, file);
}

struct RunArgs {
  std::string kernel;
  std::string pass;  // "": each file's own (fwd unless it records another)
  std::string backward_kernel;  // "": the backward kernel of the forward kernel's name
  std::vector<std::string> files;
};

// The backward oracles, made once per command: the fast double tier, with
// undecided rows escalated to the multiprecision tier.
struct BackwardOracles {
  std::unique_ptr<BackwardOracle> fast = make_fast_backward_oracle();
  std::unique_ptr<BackwardOracle> precise = make_escalation_backward_oracle();
};

// Runs each file against the named kernel (or the one the file records),
// through the pass asked for (or the one the file records).
int run_files(const Globals& g, const RunArgs& a) {
  const std::vector<std::string>& files = a.files;
  const std::string& kernel_override = a.kernel;
  const std::optional<Pass> forced = parse_pass_flag(a.pass);
  const KernelRegistry reg = g.registry();
  const Runner runner(g.run_options());
  std::optional<BackwardOracles> backward_oracles;
  bool bad_input = false, failed = false;
  auto bad = [&](const std::string& line) {
    fmt::print(stderr, "{}\n", line);
    bad_input = true;
  };
  for (const std::string& file : files) {
    std::string err;
    std::optional<Case> c = load_case_file(file, &err);
    if (!c) {
      bad(err);
      continue;
    }
    const std::string name = kernel_override.empty() ? c->kernel : kernel_override;
    if (name.empty()) {
      bad(file + ": field 'kernel': the file names no kernel; pass --kernel");
      continue;
    }
    const Pass pass = forced.value_or(c->pass);
    std::string repro_flags = pass == c->pass ? "" : "--pass " + std::string(pass_name(pass)) + " ";
    if (name != c->kernel) repro_flags += "--kernel " + name + " ";
    if (!a.backward_kernel.empty()) repro_flags += "--backward-kernel " + a.backward_kernel + " ";
    const afz_kernel* k = pass == Pass::Bwd ? nullptr : reg.find(name);
    const std::string backward_name = a.backward_kernel.empty() ? name : a.backward_kernel;
    const afz_backward_kernel* bk = pass == Pass::Fwd ? nullptr : reg.find_backward(backward_name);
    if (pass != Pass::Bwd && !k) {
      bad(fmt::format("{}: unknown kernel '{}' (see `attnfuzz kernels`)", file, name));
      continue;
    }
    if (pass != Pass::Fwd && !bk) {
      bad(fmt::format("{}: no backward kernel '{}' for --pass {} (see `attnfuzz kernels`{})", file, backward_name,
                      pass_name(pass), a.backward_kernel.empty() ? "; --backward-kernel names another" : ""));
      continue;
    }
    try {
      if (k) {
        const CaseOutcome o = runner.run(*k, *c);
        print_outcome(file, k->name, o.verdict, repro_flags);
        failed |= is_failure(o.verdict.cls);
      }
      if (bk) {
        if (!backward_oracles) backward_oracles.emplace();
        const BackwardOutcome o = run_backward_case(*bk, *c, *backward_oracles->fast, backward_oracles->precise.get(),
                                                    runner.options().check_determinism, g.timeout_s);
        print_outcome(file, backward_label(bk->name), o.verdict, repro_flags);
        failed |= is_failure(o.verdict.cls);
      }
    } catch (const std::exception& e) {
      bad(file + ": " + e.what());
    }
  }
  if (bad_input) return kExitBadInput;
  return failed ? kExitFailuresFound : kExitOk;
}

}  // namespace

std::optional<Pass> parse_pass_flag(const std::string& flag) {
  if (flag.empty()) return std::nullopt;
  if (std::optional<Pass> p = parse_pass(flag)) return p;
  throw BadInput{"--pass: expected fwd, bwd or both, got '" + flag + "'"};
}

Action add_run_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("run", "run case files against a kernel, with each verdict and its worst element");
  auto args = std::make_shared<RunArgs>();
  sub->add_option("--kernel,-k", args->kernel, "kernel name (see `attnfuzz kernels`)")->required();
  sub->add_option("--pass", args->pass, "fwd, bwd (dQ, dK, dV) or both; default: what each file records (fwd)");
  sub->add_option("--backward-kernel", args->backward_kernel,
                  "the backward kernel of --pass bwd|both (default: the one named like --kernel)");
  sub->add_option("cases", args->files, "case files")->required();
  return [&g, args]() { return run_files(g, *args); };
}

Action add_repro_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("repro", "re-run saved failing cases (each records its kernel); exit 1 while any fails");
  auto args = std::make_shared<RunArgs>();
  sub->add_option("--kernel,-k", args->kernel, "override the kernel the files record");
  sub->add_option("--pass", args->pass, "override the pass the files record: fwd, bwd or both");
  sub->add_option("--backward-kernel", args->backward_kernel,
                  "the backward kernel of --pass bwd|both (default: the one named like the kernel)");
  sub->add_option("files", args->files, "case files")->required();
  return [&g, args]() { return run_files(g, *args); };
}

}  // namespace afz::cli
