#include "harness/campaign/confirm_alone.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/campaign/exclusive_gate.h"
#include "harness/case/atomic_file.h"
#include "harness/report/findings.h"
#include "harness/run/gpu/gpu_run.h"

namespace afz {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kProvenance = "# provenance: ";
constexpr std::string_view kAloneProvenance = "# provenance: alone: ";

std::string origin_of(const ReportFailure& f, const KernelOrigins& origins) {
  const auto it = origins.find(f.kernel);
  return it == origins.end() || it->second.empty() ? "builtin" : it->second;
}

}  // namespace

KernelOrigins kernel_origins(const std::vector<CampaignKernel>& kernels) {
  KernelOrigins origins;
  for (const CampaignKernel& k : kernels)
    if (k.kernel) origins.emplace(k.kernel->name, k.origin);
  return origins;
}

KernelOrigins kernel_origins(const Report& r) {
  KernelOrigins origins;
  for (const ReportKernel& k : r.kernels) origins.emplace(k.name, k.origin);
  return origins;
}

bool awaits_alone(const ReportFailure& f) { return f.alone.outcome.empty() || f.alone.outcome == "not_run"; }

ReportAlone alone_outcome(const ReportFailure& f, const std::string& case_path, const ChildRun& run) {
  ReportAlone a;
  a.seconds = run.seconds;
  // `repro` prints "FILE: KERNEL: VERDICT (detail)" per kernel it ran.
  const std::string prefix = case_path + ": ", label = f.kernel + ": ";
  std::istringstream in(run.output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix + label, 0) != 0) continue;
    a.line = line.substr(prefix.size());
    const std::string rest = line.substr(prefix.size() + label.size());
    const std::string word = rest.substr(0, rest.find(' '));
    const std::optional<VerdictClass> v = parse_verdict_name(word);
    if (!v) break;
    const size_t open = rest.find(" (");
    const std::string detail = open == std::string::npos ? "" : rest.substr(open + 2, rest.size() - open - 3);
    if (*v == VerdictClass::Pass) a.outcome = "passes";
    else if (*v == VerdictClass::Unsupported) a.outcome = "unsupported";
    // A crash is the same failure only as the same kind of crash: a segfault
    // alone is not the misaligned address the campaign saw.
    else if (*v == f.verdict && (*v != VerdictClass::Crash || crash_kind(detail) == crash_kind(f.detail)))
      a.outcome = "fails";
    else a.outcome = "fails_differently";
    return a;
  }
  a.outcome = "not_run";
  if (!run.started) a.line = "could not start: " + run.error;
  else if (run.timed_out) a.line = fmt::format("killed after {:.0f} s without a verdict", run.seconds);
  else if (!a.line.empty()) a.line = "unreadable verdict: " + a.line;
  else if (run.signal) a.line = fmt::format("repro died of signal {} without a verdict", run.signal);
  else a.line = fmt::format("no verdict (exit {}): {}", run.exit_code, last_line(run.output));
  return a;
}

std::string with_alone_provenance(const std::string& case_text, const ReportAlone& alone) {
  const std::string added = std::string(kAloneProvenance) + alone.outcome + " (" + alone.line + ")\n";
  std::istringstream in(case_text);
  std::string out, line;
  bool placed = false;
  while (std::getline(in, line)) {
    if (line.rfind(kAloneProvenance, 0) == 0) continue;  // a run before this one's: replaced
    if (!placed && line.rfind(kProvenance, 0) != 0) out += added, placed = true;
    out += line + "\n";
  }
  if (!placed) out += added;
  return out;
}

std::vector<size_t> alone_order(const std::vector<ReportFailure>& failures) {
  std::vector<size_t> order;
  std::vector<bool> placed(failures.size(), false);
  for (const ReportFinding& g : group_findings(failures)) {
    order.push_back(g.representative);
    placed[g.representative] = true;
  }
  for (size_t i = 0; i < failures.size(); ++i)
    if (!placed[i]) order.push_back(i);
  return order;
}

namespace {

// Failure f's saved case: its case_file, or a file of that name in
// o.corpus_dir (the folder moved machines); "" when neither is there.
std::string saved_case(const ReportFailure& f, const ConfirmAloneOptions& o) {
  if (f.case_file.empty()) return "";
  std::error_code ec;
  if (fs::is_regular_file(f.case_file, ec)) return f.case_file;
  if (o.corpus_dir.empty()) return "";
  const fs::path moved = fs::path(o.corpus_dir) / fs::path(f.case_file).filename();
  return fs::is_regular_file(moved, ec) ? moved.string() : "";
}

// Failure f's repro, run alone: its outcome.  *path is the case it ran: the
// saved case, else `scratch_case` with f's case text.
ReportAlone run_alone(const ReportFailure& f, const KernelOrigins& origins, const RunOptions& run,
                      const ConfirmAloneOptions& o, const std::string& scratch_case, std::string* path) {
  *path = saved_case(f, o);
  if (path->empty()) {
    *path = scratch_case;
    std::string error;
    if (!write_file_atomically(scratch_case, f.case_text, &error))
      return {"not_run", "the case could not be written: " + error, 0};
  }
  std::vector<std::string> argv{o.executable};
  argv.insert(argv.end(), o.run_args.begin(), o.run_args.end());
  const std::vector<std::string> repro = repro_arguments(origin_of(f, origins), run, *path, f.verdict);
  argv.insert(argv.end(), repro.begin(), repro.end());
  return alone_outcome(f, *path, run_child(argv, o.timeout_s));
}

// The outcome recorded where the failure lives: its case text, its saved
// case file (`saved`, "" when it ran from scratch), and its ledger entry
// (so that a merge keeps it).
void record_alone(Report& r, ReportFailure& f, const std::string& saved) {
  f.case_text = with_alone_provenance(f.case_text, f.alone);
  if (!saved.empty()) {
    std::ifstream in(saved, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string why;
    if (!in.is_open() || !write_file_atomically(saved, with_alone_provenance(text.str(), f.alone), &why))
      r.errors.push_back("confirm alone: " + saved + ": " + (why.empty() ? "unreadable" : why));
  }
  for (ReportFailure& raw : r.raw_failures)
    if (raw.raw_signature == f.raw_signature && raw.signature == f.signature) {
      raw.alone = f.alone;
      raw.case_text = f.case_text;
    }
}

}  // namespace

bool may_fault(const ReportFailure& f) { return f.verdict == VerdictClass::Crash || f.verdict == VerdictClass::Hang; }

int64_t confirm_failures_alone(Report& r, const KernelOrigins& origins, const RunOptions& run,
                               const ConfirmAloneOptions& o) {
  // No worker of this process keeps a context beside the repros': alone.
  gpu::stop_worker();
  std::string scratch_template = (fs::temp_directory_path() / "attnfuzz-alone-XXXXXX").string();
  const char* scratch_dir = ::mkdtemp(scratch_template.data());
  const fs::path scratch = scratch_dir ? fs::path(scratch_dir) : fs::temp_directory_path();
  std::vector<size_t> order;
  for (const size_t i : alone_order(r.failures))
    if (o.again || awaits_alone(r.failures[i])) order.push_back(i);
  std::vector<char> ran(r.failures.size(), 0);  // not vector<bool>: jobs set different elements at once
  const auto start = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::mutex report_mu;
  ExclusiveGate gate;
  // Each job takes the next failure in order; none starts past the budget.
  // A job reads its own failure unlocked; what it writes (the outcome, the
  // case text, the raw ledger), and what on_recorded reads, is under the lock.
  auto spent_budget = [&] {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return o.budget_s > 0 && spent > o.budget_s;
  };
  auto job = [&] {
    for (size_t n; (n = next.fetch_add(1)) < order.size();) {
      if (spent_budget()) return;
      ReportFailure& f = r.failures[order[n]];
      const std::string scratch_case = (scratch / fmt::format("repro-{}.case", order[n])).string();
      std::string path;
      ReportAlone alone;
      {
        // A crash or hang may fault a GPU context again: with no other beside it (exclusive_gate.h).
        const ExclusiveGate::Pass pass(gate, may_fault(f));
        if (spent_budget()) return;  // the budget ran out while it waited for the gate
        alone = run_alone(f, origins, run, o, scratch_case, &path);
      }
      const std::lock_guard<std::mutex> lock(report_mu);
      f.alone = std::move(alone);
      ran[order[n]] = 1;
      record_alone(r, f, path == scratch_case ? "" : path);
      if (o.on_confirmed) o.on_confirmed(f);
      if (o.on_recorded) o.on_recorded(r);
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < std::min<int>(std::max(o.jobs, 1), int(order.size())); ++j) threads.emplace_back(job);
  job();
  for (std::thread& t : threads) t.join();
  int64_t left = 0;
  for (const size_t i : order) left += !ran[i];
  std::error_code ec;
  if (scratch_dir) fs::remove_all(scratch, ec);
  return left;
}

}  // namespace afz
