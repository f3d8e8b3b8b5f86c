// `attnfuzz run --kernel K CASE...` and `attnfuzz repro FILE...`, through
// the forward pass, the backward pass (--pass bwd: dQ, dK, dV from dO) or
// both; a saved failure records its pass, so `repro` needs no flag.
// `repro --minimize DIR` shrinks each case that fails again and saves the
// smaller repro there (harness/campaign/minimize_saved.h).
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <thread>

#include "harness/campaign/corpus.h"
#include "harness/campaign/minimize_saved.h"
#include "harness/case/case_file.h"
#include "harness/cli/commands.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/run/backward_runner.h"

namespace afz::cli {
namespace {

// One verdict as a block: verdict line, worst element, timing.
// `label` is the kernel's name, with " [bwd]" for a backward verdict;
// `repro_flags` what a repro of this file needs beyond the file itself.
void format_outcome(std::string& out, const std::string& file, const std::string& label, const Verdict& v,
                    const std::string& repro_flags) {
  auto to = std::back_inserter(out);
  fmt::format_to(to, "{}: {}: {}{}\n", file, label, verdict_name(v.cls), v.detail.empty() ? "" : " (" + v.detail + ")");
  if (v.worst.valid) fmt::format_to(to, "  worst {}\n", v.worst.format());
  if (v.elements)
    fmt::format_to(to, "  {} elements, {} failing, max error {:.3g} x bound{}\n", v.elements, v.failing,
                   v.max_over_bound,
                   v.escalated_rows ? fmt::format(", {} rows escalated to the precise oracle", v.escalated_rows) : "");
  if (is_failure(v.cls)) fmt::format_to(to, "  repro: attnfuzz repro {}{}\n", repro_flags, file);
}

struct RunArgs {
  std::string kernel;
  std::string pass;  // "": each file's own (fwd unless it records another)
  std::string backward_kernel;  // "": the backward kernel of the forward kernel's name
  std::vector<std::string> files;
  int jobs = 1;  // files run at once, each on its own thread (and GPU worker)
  std::string dump_dir;  // "": none; else each backward case's tensors in DUMP/<file stem>/
  std::string minimize_dir;  // "": none; else each failing case minimized into this corpus folder
  MinimizeOptions minimize_options;
};

// Where `repro --minimize` saves: one corpus shared by the jobs, written
// one save at a time (each minimization runs outside the lock).
struct MinimizeTarget {
  explicit MinimizeTarget(Corpus c) : corpus(std::move(c)) {}
  Corpus corpus;
  std::mutex mu;
};

// The backward oracles, made once per command: the fast double tier, with
// undecided rows escalated to the multiprecision tier.
struct BackwardOracles {
  std::unique_ptr<BackwardOracle> fast = make_fast_backward_oracle();
  std::unique_ptr<BackwardOracle> precise = make_escalation_backward_oracle();
};

// What one file gave: its verdict blocks (stdout), its one-line errors
// (stderr), and whether it failed or was bad input.
struct FileResult {
  std::string out, err;
  bool bad_input = false, failed = false;
  bool not_run = false;  // a GPU kernel, and no GPU here (or it was lost)
};

// `unsupported` for want of a GPU is not a verdict on the case: the case did not run.
bool ran_without_device(const afz_caps& caps, const Verdict& v) {
  return (caps.flags & AFZ_CAP_GPU) && v.cls == VerdictClass::Unsupported && gpu::is_no_device_detail(v.detail);
}

// Where --dump-tensors puts one file's tensors: a folder named after the
// case file (its hash-named stem keeps saved failures apart).
std::string dump_dir_of(const std::string& root, const std::string& file) {
  return (std::filesystem::path(root) / std::filesystem::path(file).stem()).string();
}

// The failing case c through `slot` shrunk and saved into the target's
// corpus; what it gave as lines under the file's verdict block.
void minimize_into(std::string& out, const std::string& file, const CampaignKernel& slot, const Case& c,
                   const Verdict& v, const Runner& runner, const RunArgs& a, MinimizeTarget& target) {
  const MinimizedFailure m = minimize_saved_failure(slot, runner, c, v, file, a.minimize_options);
  std::string path, error;
  std::optional<Corpus::Saved> saved;
  {
    const std::lock_guard<std::mutex> lock(target.mu);
    saved = target.corpus.save(m.repro, m.signature, m.raw_signature, &path, &error);
  }
  if (!saved) throw std::runtime_error("--minimize: " + error);
  auto to = std::back_inserter(out);
  const MinimizeResult& r = m.minimized;
  fmt::format_to(to, "  minimized: {} -> {} input elements in {} runs, {:.1f} s{}: {}{}\n", r.from.elements,
                 r.to.elements, r.runs, r.seconds, r.exhausted ? " (budget spent)" : "", verdict_name(m.verdict.cls),
                 m.verdict.detail.empty() ? "" : " (" + m.verdict.detail + ")");
  if (m.verdict.worst.valid) fmt::format_to(to, "    worst {}\n", m.verdict.worst.format());
  if (*saved == Corpus::Saved::KeptExisting)
    fmt::format_to(to, "    the corpus already holds a repro of its signature no larger than it\n");
  fmt::format_to(to, "    repro: {}\n", repro_command_line(slot.origin, runner.options(), path, m.verdict.cls));
}

// Runs one file against the named kernel (or the one the file records),
// through the pass asked for (or the one the file records).
FileResult run_file(const std::string& file, const RunArgs& a, std::optional<Pass> forced, const KernelRegistry& reg,
                    const Runner& runner, std::optional<BackwardOracles>& backward_oracles, double timeout_s,
                    MinimizeTarget* minimize) {
  FileResult r;
  auto bad = [&](const std::string& line) {
    r.err += line + "\n";
    r.bad_input = true;
    return r;
  };
  std::string err;
  std::optional<Case> c = load_case_file(file, &err);
  if (!c) return bad(err);
  const std::string name = a.kernel.empty() ? c->kernel : a.kernel;
  if (name.empty()) return bad(file + ": field 'kernel': the file names no kernel; pass --kernel");
  const Pass pass = forced.value_or(c->pass);
  std::string repro_flags = pass == c->pass ? "" : "--pass " + std::string(pass_name(pass)) + " ";
  if (name != c->kernel) repro_flags += "--kernel " + name + " ";
  if (!a.backward_kernel.empty()) repro_flags += "--backward-kernel " + a.backward_kernel + " ";
  const afz_kernel* k = pass == Pass::Bwd ? nullptr : reg.find(name);
  const std::string backward_name = a.backward_kernel.empty() ? name : a.backward_kernel;
  const afz_backward_kernel* bk = pass == Pass::Fwd ? nullptr : reg.find_backward(backward_name);
  if (pass != Pass::Bwd && !k) return bad(fmt::format("{}: unknown kernel '{}' (see `attnfuzz kernels`)", file, name));
  if (pass != Pass::Fwd && !bk)
    return bad(fmt::format("{}: no backward kernel '{}' for --pass {} (see `attnfuzz kernels`{})", file, backward_name,
                           pass_name(pass), a.backward_kernel.empty() ? "; --backward-kernel names another" : ""));
  if (!a.dump_dir.empty() && !bk)
    return bad(file + ": --dump-tensors: writes the backward's tensors; this file runs --pass fwd");
  try {
    if (k) {
      const CaseOutcome o = runner.run(*k, *c);
      format_outcome(r.out, file, k->name, o.verdict, repro_flags);
      r.failed |= is_failure(o.verdict.cls);
      if (minimize && is_failure(o.verdict.cls)) {
        CampaignKernel slot;
        slot.kernel = k;
        slot.origin = reg.entry(name)->origin;
        minimize_into(r.out, file, slot, *c, o.verdict, runner, a, *minimize);
      }
      r.not_run |= ran_without_device(k->caps, o.verdict);
    }
    if (bk) {
      if (!backward_oracles) backward_oracles.emplace();
      const BackwardOutcome o = run_backward_case(*bk, *c, *backward_oracles->fast, backward_oracles->precise.get(),
                                                  runner.options().check_determinism, timeout_s,
                                                  a.dump_dir.empty() ? "" : dump_dir_of(a.dump_dir, file));
      format_outcome(r.out, file, backward_label(bk->name), o.verdict, repro_flags);
      r.failed |= is_failure(o.verdict.cls);
      if (minimize && is_failure(o.verdict.cls))
        minimize_into(r.out, file, backward_campaign_kernel(*bk, reg.backward_entry(backward_name)->origin), *c,
                      o.verdict, runner, a, *minimize);
      r.not_run |= ran_without_device(bk->caps, o.verdict);
    }
  } catch (const std::exception& e) {
    return bad(file + ": " + e.what());
  }
  return r;
}

// Runs every file, `jobs` at a time; results are printed in the files'
// order as soon as each one's predecessors are done, so the output is the
// same for any jobs and a run cut short (a timeout) keeps what it printed.
int run_files(const Globals& g, const RunArgs& a) {
  if (a.jobs < 1) throw BadInput{"--jobs: must be at least 1"};
  const std::optional<Pass> forced = parse_pass_flag(a.pass);
  const KernelRegistry reg = g.registry();
  const Runner runner(g.run_options());
  const size_t n = a.files.size();
  std::optional<MinimizeTarget> minimize;
  if (!a.minimize_dir.empty()) {
    std::string error;
    std::optional<Corpus> corpus = Corpus::open(a.minimize_dir, &error);
    if (!corpus) throw BadInput{"--minimize: " + error};
    minimize.emplace(std::move(*corpus));
  }
  std::vector<std::optional<FileResult>> results(n);
  std::mutex mu;
  size_t printed = 0;
  bool bad_input = false, failed = false;
  size_t not_run = 0;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    std::optional<BackwardOracles> backward_oracles;  // per thread: made on its first backward file
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      FileResult r = run_file(a.files[i], a, forced, reg, runner, backward_oracles, g.timeout_s,
                              minimize ? &*minimize : nullptr);
      const std::lock_guard<std::mutex> lock(mu);
      results[i] = std::move(r);
      for (; printed < n && results[printed]; ++printed) {
        const FileResult& done = *results[printed];
        std::fputs(done.err.c_str(), stderr);
        std::fputs(done.out.c_str(), stdout);
        std::fflush(stdout);
        bad_input |= done.bad_input;
        failed |= done.failed;
        not_run += done.not_run ? 1 : 0;
        results[printed].reset();  // printed: its text is not kept
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < std::min<int>(a.jobs, int(std::max<size_t>(n, 1))); ++j) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  // A repro that could not run must not read as "fixed" (exit 0): exit 2
  // unless a failure was found meanwhile (exit 1), as a lost GPU in a campaign.
  if (not_run > 0)
    fmt::print(stderr, "attnfuzz: {} of {} case file(s) not run: no GPU (each says why above)\n", not_run, n);
  if (failed) return bad_input ? kExitBadInput : kExitFailuresFound;
  return bad_input || not_run > 0 ? kExitBadInput : kExitOk;
}

void add_dump_option(CLI::App* sub, RunArgs& args) {
  sub->add_option("--dump-tensors", args.dump_dir,
                  "backward: write each case's inputs, the O and LSE given, the exact and the kernel's dQ, dK, dV as "
                  ".npy files into DIR/<case file stem>/ (harness/case/tensor_dump.h)");
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
  sub->add_option("--jobs,-j", args->jobs, "files run at once (output stays in file order)")->capture_default_str();
  add_dump_option(sub, *args);
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
  sub->add_option("--jobs,-j", args->jobs, "files run at once (output stays in file order)")->capture_default_str();
  add_dump_option(sub, *args);
  sub->add_option("--minimize", args->minimize_dir,
                  "shrink each case that fails again (same kernel, verdict and gradient) and save the smaller repro "
                  "in this corpus folder, one per signature");
  sub->add_option("--minimize-runs", args->minimize_options.max_runs, "kernel runs per minimization")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--minimize-time", args->minimize_options.max_seconds, "seconds per minimization")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return [&g, args]() { return run_files(g, *args); };
}

}  // namespace afz::cli
