// `attnfuzz fuzz` (the campaign driver) and `attnfuzz replay` (re-run a
// corpus: the regression mode for CI).
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include "harness/campaign/campaign.h"
#include "harness/campaign/corpus.h"
#include "harness/campaign/progress.h"
#include "harness/campaign/shard.h"
#include "harness/campaign/stop_request.h"
#include "harness/case/case_file.h"
#include "harness/cli/commands.h"
#include "harness/report/findings.h"
#include "harness/report/report.h"
#include "harness/report/report_views.h"
#include "harness/run/gpu/gpu_run.h"

namespace afz::cli {

namespace {

// "a,b" "c" -> a, b, c (empty names dropped).
std::vector<std::string> kernel_names(const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  for (const std::string& spec : specs)
    for (size_t start = 0; start <= spec.size();) {
      const size_t comma = std::min(spec.find(',', start), spec.size());
      if (comma > start) out.push_back(spec.substr(start, comma - start));
      start = comma + 1;
    }
  return out;
}

}  // namespace

// "all" (every kernel but the deliberately broken mutants), a name, or a
// comma-separated list of both.
std::vector<CampaignKernel> resolve_kernels(const KernelRegistry& reg, const std::vector<std::string>& specs) {
  std::vector<CampaignKernel> out;
  auto add = [&](const KernelEntry& e) {
    for (const CampaignKernel& k : out)
      if (k.kernel == e.kernel) return;
    out.push_back({e.kernel, e.origin});
  };
  for (const std::string& name : kernel_names(specs)) {
    if (name == "all") {
      for (const KernelEntry& e : reg.entries())
        if (in_all_kernels(e.origin)) add(e);
      continue;
    }
    const KernelEntry* found = reg.entry(name);
    if (!found) throw BadInput{"--kernel: unknown kernel '" + name + "' (see `attnfuzz kernels`)"};
    add(*found);
  }
  if (out.empty()) throw BadInput{"--kernel: no kernel named"};
  return out;
}

std::vector<std::string> resolve_backward_kernels(const KernelRegistry& reg, const std::vector<std::string>& specs,
                                                  bool all_must_exist) {
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const std::string& name : kernel_names(specs)) {
    if (name == "all") {
      for (const BackwardKernelEntry& e : reg.backward_entries())
        if (in_all_kernels(e.origin)) add(e.kernel->name);
    } else if (reg.find_backward(name)) {
      add(name);
    } else if (all_must_exist) {
      throw BadInput{"--kernel: no backward kernel '" + name + "' (see `attnfuzz kernels`)"};
    }
  }
  if (all_must_exist && out.empty()) throw BadInput{"--kernel: no backward kernel named"};
  return out;
}

void require_device_if_all_gpu(const std::vector<CampaignKernel>& kernels) {
  if (kernels.empty()) return;
  std::string names;
  for (const CampaignKernel& k : kernels) {
    if (!(k.kernel->caps.flags & AFZ_CAP_GPU)) return;
    names += (names.empty() ? "" : ", ") + std::string(k.kernel->name);
  }
  if (const std::string why = gpu::gpu_unavailable_reason(); !why.empty())
    throw BadInput{fmt::format("{}: every kernel asked for runs on the GPU ({}); nothing to run", why, names)};
}

std::vector<CampaignKernel> resolve_pass_kernels(const KernelRegistry& reg, const std::vector<std::string>& specs,
                                                 Pass pass) {
  if (pass == Pass::Fwd) return resolve_kernels(reg, specs);
  std::vector<CampaignKernel> out;
  auto add_forward = [&](const std::string& name) {
    for (const CampaignKernel& k : resolve_kernels(reg, {name}))
      if (std::none_of(out.begin(), out.end(), [&](const CampaignKernel& o) { return o.kernel == k.kernel; }))
        out.push_back(k);
  };
  auto add_backward = [&](const BackwardKernelEntry& e) {
    if (std::none_of(out.begin(), out.end(), [&](const CampaignKernel& o) { return o.backward == e.kernel; }))
      out.push_back(backward_campaign_kernel(*e.kernel, e.origin));
  };
  for (const std::string& name : kernel_names(specs)) {
    if (name == "all") {
      if (pass == Pass::Both) add_forward(name);
      for (const BackwardKernelEntry& e : reg.backward_entries())
        if (in_all_kernels(e.origin)) add_backward(e);
      continue;
    }
    const BackwardKernelEntry* backward = reg.backward_entry(name);
    if (!backward && reg.find(name))
      throw BadInput{fmt::format("--kernel: '{}' has no backward kernel of that name for --pass {} "
                                 "(see `attnfuzz kernels`)",
                                 name, pass_name(pass))};
    if (!backward)
      throw BadInput{fmt::format("--kernel: {} kernel '{}' (see `attnfuzz kernels`)",
                                 pass == Pass::Both ? "unknown" : "no backward", name)};
    if (pass == Pass::Both && reg.find(name)) add_forward(name);
    add_backward(*backward);
  }
  if (out.empty()) throw BadInput{"--kernel: no backward kernel named"};
  return out;
}

std::string failure_label(const ReportFailure& f) {
  std::string s = f.kernel + " " + std::string(verdict_name(f.verdict));
  if (!f.gradient.empty()) s += " in " + f.gradient;
  return s;
}

// "90", "90s", "5m", "1.5h" -> seconds.
double parse_duration(const std::string& s) {
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  const std::string unit(end, s.data() + s.size());
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  if (ec != std::errc() || scale == 0 || !(value > 0))
    throw BadInput{"--time: expected a positive duration such as 90, 90s, 5m or 1.5h, got '" + s + "'"};
  return value * scale;
}

std::string verdict_column(const ReportCell& c, VerdictClass v) {
  const int64_t n = c.count(v);
  return n ? std::to_string(n) : "-";
}

// The summary table's kernel column: at least this wide.
constexpr size_t kKernelColumn = 24;

// The end-of-run table: one row per kernel x class, failures by class.
void print_summary(const Report& r, const std::string& report_dir) {
  const ReportRun& run = r.run;
  fmt::print("\nattnfuzz {}: {} cases in {:.1f} s ({:.1f} cases/s), seed {}, jobs {}, oracle {}\n", run.kind, run.cases,
             run.wall_s, r.timing.cases_per_second, run.seed, run.jobs, run.oracle);
  // The kernel column fits the longest name ("cpu.bwd.mutant.ds_no_scale [bwd]").
  size_t width = kKernelColumn;
  for (const ReportCell& c : r.cells) width = std::max(width, c.kernel.size());
  fmt::print("{:<{}} {:<10} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}\n", "kernel", width, "class", "cases", "pass",
             "unsup", "fail", "num", "naninf", "other");
  for (const ReportCell& c : r.cells) {
    const int64_t other = c.failed() - c.count(VerdictClass::NumericMismatch) - c.count(VerdictClass::NanInf);
    fmt::print("{:<{}} {:<10} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}\n", c.kernel, width, c.generator, c.cases,
               c.count(VerdictClass::Pass), verdict_column(c, VerdictClass::Unsupported),
               c.failed() ? std::to_string(c.failed()) : "-", verdict_column(c, VerdictClass::NumericMismatch),
               verdict_column(c, VerdictClass::NanInf), other ? std::to_string(other) : "-");
  }
  const ReportTiming& t = r.timing;
  fmt::print("time: generate {:.2f} s, oracle {:.2f} s, kernels {:.2f} s, judge {:.2f} s, minimize {:.2f} s"
             " (summed over jobs); wall {:.2f} s\n",
             t.generate_s, t.oracle_s, t.kernel_s, t.judge_s, t.minimize_s, t.wall_s);
  // Inside `kernels`: what starting GPU workers cost (one per job, and one
  // after every case that killed its worker).
  if (const gpu::WorkerStarts w = gpu::worker_starts(); w.started > 0)
    fmt::print("GPU workers: {} started, {:.2f} s waiting for them to start\n", w.started, w.wait_s);
  if (r.failures.empty()) {
    fmt::print("failures: none\n");
  } else {
    // One line per distinct defect (findings.h), its variants folded in.
    const std::vector<ReportFinding> findings = group_findings(r.failures);
    fmt::print("failures: {} findings ({} signatures: {} new, {} known) in {} failing cases\n", findings.size(),
               r.failures.size(), r.new_failures(), r.known_failures(), r.failing_cases());
    for (const ReportFinding& g : findings) {
      const ReportFailure& rep = r.failures[g.representative];
      fmt::print("  {:<4} {:<7} {}{}{}\n", g.id, g.status, finding_line(g),
                 rep.repro.empty() ? "" : "; repro: " + rep.repro,
                 rep.alone.outcome.empty() ? "" : "; alone: " + rep.alone.outcome);
    }
  }
  for (const std::string& e : r.errors) fmt::print("error: {}\n", e);
  if (!report_dir.empty()) fmt::print("report: {}/ (report.json, report.html, junit.xml, results.sarif)\n", report_dir);
}

namespace {

// Cases of a campaign given neither --cases nor --time.
constexpr int64_t kDefaultCases = 1000;
// Where failures go when neither --corpus nor --out names a place.
constexpr const char* kDefaultCorpus = "attnfuzz-failures";

ProgressLine::Mode progress_mode(const std::string& s) {
  if (s == "auto") return ProgressLine::detect(stdout);
  if (s == "terminal") return ProgressLine::Mode::Terminal;
  if (s == "plain") return ProgressLine::Mode::Plain;
  if (s == "off") return ProgressLine::Mode::Off;
  throw BadInput{"--progress: expected auto, terminal, plain or off, got '" + s + "'"};
}

// report.json, report.html, junit.xml and results.sarif.
void write_report(const Report& r, const std::string& dir) {
  if (dir.empty()) return;
  std::string error;
  if (!write_report_folder(r, dir, &error)) throw BadInput{error};
}

struct FuzzArgs {
  std::vector<std::string> kernels;
  std::string pass = "fwd";
  std::string time;
  int64_t cases = -1;
  uint64_t seed = 1;
  int64_t first_case = 0;
  std::string shard;
  std::string corpus, out, classes = "all", progress = "auto";
  int jobs = 1;
  bool no_minimize = false;
  double checkpoint = -1;
  int minimize_runs = MinimizeOptions{}.max_runs;
  double minimize_time = MinimizeOptions{}.max_seconds;
  ConfirmAloneArgs confirm_alone;
};

int run_fuzz(const Globals& g, const FuzzArgs& a) {
  const KernelRegistry reg = g.registry();
  CampaignOptions o;
  const Pass pass = parse_pass_flag(a.pass).value_or(Pass::Fwd);
  o.kernels = resolve_pass_kernels(reg, a.kernels, pass);
  require_device_if_all_gpu(o.kernels);
  o.seed = a.seed;
  o.first_case = a.first_case;
  o.time_s = a.time.empty() ? -1 : parse_duration(a.time);
  o.cases = a.cases >= 0 ? a.cases : (o.time_s < 0 ? kDefaultCases : -1);
  if (!a.shard.empty()) {
    std::string error;
    const std::optional<ShardSpec> s = parse_shard(a.shard, &error);
    if (!s) throw BadInput{error};
    if (o.cases < 0) throw BadInput{"--shard splits a case count: give --cases (the whole campaign's), not only --time"};
    const CaseRange range = shard_range(*s, o.first_case, o.cases);
    o.first_case = range.first;
    o.cases = range.cases;
  }
  o.jobs = a.jobs > 0 ? a.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  std::string error;
  // A backward campaign's default mix adds the backward classes (what breaks gradients).
  auto mix = GeneratorMix::parse(a.classes, &error, pass == Pass::Fwd ? Pass::Fwd : Pass::Bwd);
  if (!mix) throw BadInput{"--classes: " + error};
  o.mix = *mix;
  o.corpus_dir = !a.corpus.empty() ? a.corpus : !a.out.empty() ? a.out + "/corpus" : kDefaultCorpus;
  o.minimize = !a.no_minimize;
  o.minimize_options.max_runs = a.minimize_runs;
  o.minimize_options.max_seconds = a.minimize_time;
  o.command = g.command_line;

  ProgressLine progress(stdout, progress_mode(a.progress));
  o.on_progress = [&](const ProgressSnapshot& s) { progress.update(s); };
  o.on_failure = [&](const ReportFailure& f) {
    progress.message(fmt::format("{} failure: {} (case {}, class {}){}", f.status, failure_label(f), f.case_index,
                                 f.generator,
                                 f.repro.empty() ? "" : "\n  repro: " + f.repro));
  };
  if (!a.out.empty() && a.checkpoint > 0) {
    o.checkpoint_s = a.checkpoint;
    o.on_checkpoint = [&](const Report& now) {
      std::string why;
      if (!write_report_json(now, a.out, &why)) progress.message("checkpoint: " + why);
    };
  }
  const Runner runner(g.run_options());
  // SIGINT/SIGTERM (a CI timeout) ends the run at a case boundary with its report written.
  install_stop_handlers();
  Report r = run_campaign(o, runner);
  progress.finish();
  confirm_alone_if_asked(a.confirm_alone, g, runner.options(), o.kernels, r);
  write_report(r, a.out);
  print_summary(r, a.out);
  // A lost GPU: exit 2 (could not do what was asked) unless new failures
  // were found first (exit 1: a finding is never lost).
  if (r.run.stop_reason == kGpuLostStopReason) {
    fmt::print("fuzz stopped: the GPU was lost: {}; the report covers the cases run before\n", gpu::gpu_lost_reason());
    return r.new_failures() > 0 ? kExitFailuresFound : kExitBadInput;
  }
  return r.new_failures() > 0 || !r.errors.empty() ? kExitFailuresFound : kExitOk;
}

struct ReplayArgs {
  std::vector<std::string> dirs;
  std::vector<std::string> kernels;
  std::string pass;  // "": each file's own
  std::string out;
  bool verbose = false;
};

int run_replay(const Globals& g, const ReplayArgs& a) {
  const KernelRegistry reg = g.registry();
  ReplayOptions o;
  o.dirs = a.dirs;
  o.pass = parse_pass_flag(a.pass);
  // --kernel names forward kernels, and the backward kernels of the same
  // names for files (or a --pass) that run the backward pass; under
  // --pass bwd, backward kernels only.
  if (!a.kernels.empty()) {
    o.backward_kernels = resolve_backward_kernels(reg, a.kernels, /*all_must_exist=*/o.pass == Pass::Bwd);
    if (o.pass != Pass::Bwd) {
      // A name that is only a backward kernel serves the backward pass alone.
      std::vector<std::string> forward;
      for (const std::string& name : kernel_names(a.kernels))
        if (reg.find(name) || !reg.find_backward(name)) forward.push_back(name);
      if (!forward.empty()) o.kernels = resolve_kernels(reg, forward);
    }
  }
  o.verbose = a.verbose;
  o.command = g.command_line;
  const Runner runner(g.run_options());
  const ReplayResult res = replay_corpus(o, reg, runner, stdout, stderr);
  write_report(res.report, a.out);
  fmt::print("replay: {} case files, {} kernel runs: {} pass, {} unsupported, {} fail ({:.1f} s)\n", res.files,
             res.runs, res.passed, res.unsupported, res.failed, res.report.run.wall_s);
  return res.exit_code();
}

}  // namespace

Action add_fuzz_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("fuzz", "run an adversarial fuzz campaign; exit 1 when something new failed");
  auto a = std::make_shared<FuzzArgs>();
  sub->add_option("--kernel,-k", a->kernels, "kernel name, comma list, or 'all' (every non-mutant kernel)")
      ->required();
  sub->add_option("--pass", a->pass,
                  "fwd, bwd (the backward kernels of the same names: dQ, dK, dV) or both, per case")
      ->capture_default_str();
  auto* time = sub->add_option("--time,-t", a->time, "run for this long: 90, 90s, 5m, 1.5h");
  sub->add_option("--cases,-n", a->cases, "run this many cases (default " + std::to_string(kDefaultCases) +
                                              " when no --time)")
      ->check(CLI::NonNegativeNumber)
      ->excludes(time);
  sub->add_option("--seed,-s", a->seed, "campaign seed: case i is a function of (seed, i)")->capture_default_str();
  sub->add_option("--first-case", a->first_case, "index of the first case (shards)")->check(CLI::NonNegativeNumber);
  sub->add_option("--shard", a->shard,
                  "K/N: run shard K (from 0) of N, the contiguous K-th part of the --cases cases; "
                  "`report merge` of the N reports equals one run");
  sub->add_option("--corpus", a->corpus,
                  "folder of minimized failures; resumes from what it holds (default OUT/corpus, else " +
                      std::string(kDefaultCorpus) + ")");
  sub->add_option("--out,-o", a->out, "report folder (report.json, report.html, junit.xml, results.sarif)");
  sub->add_option("--jobs,-j", a->jobs, "worker threads (0: one per core); results do not depend on it")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  sub->add_option("--classes", a->classes,
                  "generator classes and weights, e.g. late_max=3,masking=1, or all (the default mix; the opt-in "
                  "scale class only by name: scale)")
      ->capture_default_str();
  sub->add_flag("--no-minimize", a->no_minimize, "save failures as generated, without shrinking them");
  sub->add_option("--minimize-runs", a->minimize_runs, "kernel runs per minimization")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--minimize-time", a->minimize_time, "seconds per minimization")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--checkpoint", a->checkpoint,
                  "with --out: rewrite OUT/report.json every this many seconds while the campaign runs "
                  "(stop_reason 'running'); the full folder is written at the end")
      ->check(CLI::PositiveNumber);
  sub->add_option("--progress", a->progress, "progress display: auto, terminal, plain, off")->capture_default_str();
  add_confirm_alone_options(sub, a->confirm_alone);
  return [&g, a]() { return run_fuzz(g, *a); };
}

Action add_replay_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("replay", "re-run every case file of corpus folders; exit 1 if any fails");
  auto a = std::make_shared<ReplayArgs>();
  sub->add_option("dirs", a->dirs, "corpus folders (their *.case files)")->required();
  sub->add_option("--kernel,-k", a->kernels, "run against these kernels (name, list, 'all') instead of each file's");
  sub->add_option("--pass", a->pass, "fwd, bwd or both for every file, instead of the pass each file records");
  sub->add_option("--out,-o", a->out, "report folder (report.json, report.html, junit.xml, results.sarif)");
  sub->add_flag("--verbose,-v", a->verbose, "print every verdict, not only failures");
  return [&g, a]() { return run_replay(g, *a); };
}

}  // namespace afz::cli
