#include "harness/campaign/mutant_gate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "harness/case/case_io.h"
#include "harness/case/transforms.h"
#include "harness/run/gpu/gpu_run.h"

namespace afz {
namespace {

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// "3" when every sequence has the same value, else "3,0,17".
std::string lengths(const std::vector<int32_t>& v) {
  std::string s;
  const bool same = std::all_of(v.begin(), v.end(), [&](int32_t n) { return n == v.front(); });
  for (size_t i = 0; i < (same ? std::min<size_t>(1, v.size()) : v.size()); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string align_name(afz_align a) { return a == AFZ_ALIGN_TOP_LEFT ? "tl" : "br"; }

std::string pattern_text(const MaskPattern& p) {
  std::string s = p.kind;
  for (int64_t a : p.args) s += " " + std::to_string(a);
  return s;
}

std::string add_value_text(const AddMask& a) {
  switch (a.value_kind) {
    case AddValueKind::NegInf: return "-inf";
    case AddValueKind::Lowest: return "lowest";
    default: return format_double(a.value);
  }
}

// Kernel runs of a campaign that the kernel declined.
int64_t unsupported_runs(const Report& r) {
  int64_t n = 0;
  for (const ReportCell& c : r.cells) n += c.count(VerdictClass::Unsupported);
  return n;
}

MutantRow run_one(const CampaignKernel& mutant, const MutantGateOptions& g, const Runner& runner) {
  MutantRow row;
  row.kernel = mutant.kernel->name;
  row.origin = mutant.origin;
  // A GPU mutant on a machine without a usable device would decline every
  // case of its budget: say so at once instead.
  if (mutant.kernel->caps.flags & AFZ_CAP_GPU) {
    if (std::string why = gpu::gpu_unavailable_reason(); !why.empty()) {
      row.untested = true;
      row.untested_reason = why;
      row.stop_reason = "untested";
      return row;
    }
  }

  CampaignOptions o;
  o.kernels = {mutant};
  o.seed = g.seed;
  o.cases = g.budget_cases;
  o.time_s = g.time_per_mutant_s;
  o.jobs = g.jobs;
  o.mix = g.mix;
  o.corpus_dir = g.corpus_dir;
  o.minimize = true;
  o.minimize_options = g.minimize_options;
  o.keep_case_records = false;
  o.command = g.command;
  o.stop_after_failures = 1;  // a mutant needs one kill
  Stopwatch clock;
  double kill_s = 0;
  o.on_failure = [&](const ReportFailure& f) {
    // Called after the failure was minimized and saved: take that back out.
    if (!row.kill) kill_s = clock.seconds() - f.minimize.seconds;
  };
  row.campaign = run_campaign(o, runner);

  const Report& r = row.campaign;
  if (!r.failures.empty()) {
    const ReportFailure& f = r.failures.front();
    row.killed = true;
    row.kill = f;
    row.cases = f.case_index - o.first_case + 1;
    row.seconds = std::max(0.0, kill_s);
    row.stop_reason = "kill";
    std::optional<Case> c = parse_case(f.case_text, nullptr);
    row.case_summary = c ? case_summary(*c) : "(case text does not parse)";
  } else {
    row.cases = r.run.cases;
    row.seconds = r.run.wall_s;
    row.stop_reason = r.run.stop_reason;
    // A campaign cut short by a lost GPU proved nothing about the mutant:
    // untested, not a survivor (gpu_run.h).
    if (r.run.stop_reason == kGpuLostStopReason) {
      row.untested = true;
      row.untested_reason = "the GPU was lost: " + gpu::gpu_lost_reason();
      row.stop_reason = "untested";
    } else if (row.cases > 0 && unsupported_runs(r) == row.cases) {
      row.untested = true;
      row.untested_reason = "declined all " + std::to_string(row.cases) + " cases";
      row.stop_reason = "untested";
    }
  }
  return row;
}

}  // namespace

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string case_summary(const Case& c) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (c.batch != 1) add("b" + std::to_string(c.batch));
  if (c.heads_q != 1 || c.heads_kv != 1)
    add(c.heads_q == c.heads_kv ? "h" + std::to_string(c.heads_q)
                                : "hq" + std::to_string(c.heads_q) + "/hkv" + std::to_string(c.heads_kv));
  add("q=" + lengths(c.seqlens_q));
  add("k=" + lengths(c.seqlens_k));
  add("d=" + std::to_string(c.head_dim) + (c.head_dim_v != c.head_dim ? "/" + std::to_string(c.head_dim_v) : ""));
  add(std::string(dtype_name(c.in_dtype)) +
      (c.out_dtype != c.in_dtype ? "->" + std::string(dtype_name(c.out_dtype)) : ""));
  if (c.scale) add("scale=" + format_double(*c.scale));
  if (c.softcap != 0) add("softcap=" + format_double(c.softcap));
  if (c.has_window) {
    if (c.window_left < 0 && c.window_right == 0)
      add("causal(" + align_name(c.align) + ")");
    else
      add("window(" + std::to_string(c.window_left) + "," + std::to_string(c.window_right) + "," +
          align_name(c.align) + ")");
  }
  if (c.bool_mask) add("mask(" + pattern_text(*c.bool_mask) + ")");
  if (c.add_mask) add("add_mask(" + add_value_text(*c.add_mask) + " " + pattern_text(c.add_mask->pattern) + ")");
  if (c.layout == Layout::BSHD) add("bshd");
  if (c.layout == Layout::PackedQKV) add("packed_qkv");
  if (c.row_gap) add("gap" + std::to_string(c.row_gap));
  if (c.kv_broadcast == KvBroadcast::Heads) add("kv_bcast(heads)");
  if (c.kv_broadcast == KvBroadcast::Batch) add("kv_bcast(batch)");
  if (c.poison == Poison::Inf) add("poison(inf)");
  if (c.poison == Poison::None) add("poison(none)");
  for (const Transform& t : c.transforms) {
    std::string p;
    for (const auto& [k, v] : t.params) p += (p.empty() ? "" : ",") + k + "=" + format_double(v);
    add("t:" + t.name + (p.empty() ? "" : "(" + p + ")"));
  }
  return s;
}

MutantGateResult run_mutant_gate(const std::vector<CampaignKernel>& mutants, const MutantGateOptions& options,
                                 const Runner& runner) {
  if (mutants.empty()) throw std::runtime_error("mutants: no mutant kernels to run");
  if (options.budget_cases <= 0) throw std::runtime_error("mutants: --budget-cases must be at least 1");
  if (!(options.time_per_mutant_s > 0)) throw std::runtime_error("mutants: --time-per-mutant must be positive");
  MutantGateResult result;
  std::vector<double> kill_times;
  for (const CampaignKernel& m : mutants) {
    MutantRow row = run_one(m, options, runner);
    if (row.untested) {
      ++result.untested;
    } else if (row.killed) {
      ++result.killed;
      kill_times.push_back(row.seconds);
      if (!result.worst_s || row.seconds > *result.worst_s) {
        result.worst_s = row.seconds;
        result.worst_kernel = row.kernel;
      }
    } else {
      ++result.survived;
    }
    if (options.on_row) options.on_row(row);
    result.rows.push_back(std::move(row));
  }
  if (!kill_times.empty()) result.median_s = median_of(kill_times);
  return result;
}

Report mutant_gate_report(const MutantGateResult& result, const MutantGateOptions& options,
                          const std::string& oracle, double wall_s) {
  Report r;
  ReportRun& run = r.run;
  run.kind = "mutants";
  run.command = options.command;
  run.seed = options.seed;
  run.case_limit = options.budget_cases;
  run.time_limit_s = options.time_per_mutant_s;
  run.jobs = options.jobs;
  run.oracle = oracle;
  run.classes = options.mix.describe();
  run.corpus = options.corpus_dir;
  run.wall_s = wall_s;
  run.stop_reason = "kills";
  for (const GeneratorMix::Entry& e : options.mix.entries()) r.generators.push_back({e.gen->name, e.weight, 0});
  for (const MutantRow& row : result.rows) {
    if (row.untested) continue;
    const Report& c = row.campaign;
    if (run.started_utc.empty()) run.started_utc = c.run.started_utc;
    run.cases += c.run.cases;
    run.rerun_share = c.run.rerun_share;
    run.reruns += c.run.reruns;
    if (!row.killed && run.stop_reason == "kills") run.stop_reason = row.stop_reason;
    r.kernels.insert(r.kernels.end(), c.kernels.begin(), c.kernels.end());
    r.cells.insert(r.cells.end(), c.cells.begin(), c.cells.end());
    r.failures.insert(r.failures.end(), c.failures.begin(), c.failures.end());
    r.errors.insert(r.errors.end(), c.errors.begin(), c.errors.end());
    for (const ReportGenerator& g : c.generators)
      for (ReportGenerator& mine : r.generators)
        if (mine.name == g.name) mine.cases += g.cases;
    r.timing.generate_s += c.timing.generate_s;
    r.timing.oracle_s += c.timing.oracle_s;
    r.timing.kernel_s += c.timing.kernel_s;
    r.timing.judge_s += c.timing.judge_s;
    r.timing.minimize_s += c.timing.minimize_s;
    r.append_raw_failures(c);
    ReportMutant m;
    m.kernel = row.kernel;
    m.killed = row.killed;
    m.cases = c.run.cases;
    if (row.kill) {
      m.cases_to_kill = row.cases;
      m.seconds_to_kill = row.seconds;
      m.verdict = row.kill->verdict;
      m.signature = row.kill->signature;
    }
    r.mutants.push_back(std::move(m));
  }
  r.timing.wall_s = wall_s;
  r.timing.cases_per_second = wall_s > 0 ? double(run.cases) / wall_s : 0;
  return r;
}

}  // namespace afz
