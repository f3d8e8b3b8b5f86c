#include "harness/campaign/campaign.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include "harness/campaign/corpus.h"
#include "harness/campaign/ordered_pool.h"
#include "harness/campaign/stop_request.h"
#include "harness/run/backward_runner.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/case/case_file.h"
#include "harness/judge/signature.h"

namespace afz {
namespace {

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// The stop reason of a checkpoint written while the campaign runs.
constexpr const char* kRunningStopReason = "running";

// How far workers may run ahead of the consumer, in cases per worker: deep
// enough that a slow case (8K keys) does not idle the others, shallow
// enough that stopping on a time limit wastes little.
constexpr int kLookaheadPerJob = 4;

// One case through every kernel: the worker's whole job.
struct CaseWork {
  int64_t index = 0;
  const GeneratorDef* generator = nullptr;
  Case c;
  std::vector<CaseOutcome> outcomes;  // per kernel
  double generate_s = 0, oracle_s = 0;
  int64_t reruns = 0;                 // kernels run twice (determinism.h)
  std::string error;                  // the case could not be built or judged
};

CaseWork run_case(const CampaignOptions& o, const Runner& runner, int64_t index) {
  CaseWork w;
  w.index = index;
  Stopwatch generate;
  GeneratedCase g = generate_case(o.mix, o.seed, uint64_t(index));
  w.generator = g.generator;
  w.c = std::move(g.c);
  w.outcomes.resize(o.kernels.size());
  try {
    // Budgets first, from the case alone (case_budget.h): a case that no
    // kernel can be given here (a scale case on a CPU run) is never built.
    std::vector<std::string> declined(o.kernels.size());
    bool taken = false;
    for (size_t k = 0; k < o.kernels.size(); ++k) {
      declined[k] = runner.declined_before_inputs(*o.kernels[k].kernel, w.c, o.kernels[k].backward != nullptr);
      taken |= declined[k].empty();
    }
    if (!taken) {
      for (size_t k = 0; k < o.kernels.size(); ++k) {
        w.outcomes[k].verdict.cls = VerdictClass::Unsupported;
        w.outcomes[k].verdict.detail = declined[k];
      }
      w.generate_s = generate.seconds();
      return w;
    }
    auto inputs = std::make_unique<Materialized>(w.c);
    w.generate_s = generate.seconds();
    // Capabilities next: a case no kernel takes costs no oracle time.
    bool any = false;  // a forward kernel takes the case: the forward oracle runs
    for (size_t k = 0; k < o.kernels.size(); ++k) {
      if (declined[k].empty()) declined[k] = unsupported_reason(*o.kernels[k].kernel, inputs->problem());
      any |= declined[k].empty() && !o.kernels[k].backward;
    }
    const bool rerun = reruns_case(o.seed, uint64_t(index), o.rerun_share);
    OracleResult reference;
    if (any) {
      Stopwatch oracle;
      reference = runner.reference(*inputs);  // once, shared by every kernel
      w.oracle_s = oracle.seconds();
    }
    // One set of inputs for every kernel of the case, as the oracle saw
    // them: the runner re-poisons the outputs before each kernel, and the
    // inputs are read-only under the ABI.  (Materializing per kernel would
    // multiply the campaign's largest cost by the number of kernels.)
    for (size_t k = 0; k < o.kernels.size(); ++k) {
      if (!declined[k].empty()) {
        w.outcomes[k].verdict.cls = VerdictClass::Unsupported;
        w.outcomes[k].verdict.detail = declined[k];
        continue;
      }
      w.outcomes[k] = run_campaign_kernel(o.kernels[k], runner, w.c, *inputs, &reference, rerun);
      w.reruns += w.outcomes[k].reran ? 1 : 0;
      // A backward slot materializes its own inputs and runs its own oracle.
      w.generate_s += w.outcomes[k].timing.generate;
      w.oracle_s += w.outcomes[k].timing.oracle;
    }
  } catch (const std::exception& e) {
    w.error = e.what();
  }
  return w;
}

// The campaign's consumer side: counts, dedupe, minimization, corpus.
class Campaign {
 public:
  Campaign(const CampaignOptions& o, const Runner& runner) : o_(o), runner_(runner) {
    if (o.kernels.empty()) throw std::runtime_error("fuzz: no kernels to run");
    if (o.cases < 0 && o.time_s < 0) throw std::runtime_error("fuzz: give a case limit or a time limit");
    if (!o.corpus_dir.empty()) {
      std::string error;
      corpus_ = Corpus::open(o.corpus_dir, &error);
      if (!corpus_) throw std::runtime_error(error);
      for (const std::string& e : corpus_->load_errors()) report_.errors.push_back("corpus: " + e);
      // Everything the corpus holds now is "known": finding it again is no news.
      for (std::string& sig : corpus_->signatures()) known_at_start_.insert(std::move(sig));
    }
    const auto& entries = o.mix.entries();
    for (size_t g = 0; g < entries.size(); ++g) generator_index_[entries[g].gen] = g;
    for (const CampaignKernel& k : o.kernels)
      for (const auto& e : entries) report_.cells.push_back({k.kernel->name, e.gen->name, 0, {}});
    class_cases_.assign(entries.size(), 0);
    kernel_s_.assign(o.kernels.size(), 0);
    for (const CampaignKernel& k : o.kernels) timing_at_start_.push_back(library_kernel_timing(*k.kernel));
  }

  Report run();

 private:
  void consume(CaseWork& w);
  void failure(const CaseWork& w, size_t k);
  std::optional<CaseOutcome> run_one(size_t k, const Case& c, VerdictClass cls) const;
  std::string repro_command(size_t k, const std::string& path, VerdictClass cls) const;
  void add_raw(ReportFailure f, const CaseSize& size);
  ProgressSnapshot snapshot() const;
  void after_case();
  Report assemble(const std::string& stop_reason) const;
  Report finish(const std::string& stop_reason);

  const CampaignOptions& o_;
  const Runner& runner_;
  Stopwatch clock_;
  std::string started_utc_ = utc_now();
  Report report_;
  std::optional<Corpus> corpus_;
  std::set<std::string> known_at_start_;
  std::map<const GeneratorDef*, size_t> generator_index_;
  std::map<std::string, size_t> by_signature_;       // signature -> report_.failures index
  std::map<std::string, std::string> raw_to_signature_;
  std::map<std::string, CaseSize> best_size_;          // signature -> size of its kept repro
  std::vector<int64_t> class_cases_;
  std::vector<double> kernel_s_;
  // Libraries' own time splits when the run began (afz_kernel_timing).
  std::vector<std::optional<afz_kernel_timing>> timing_at_start_;
  int64_t consumed_ = 0, failing_cases_ = 0, unsupported_ = 0;
  double last_checkpoint_s_ = 0;
};

// Runs k on c as the failure of class `cls` was found: a nondeterministic
// one shows only when the kernel runs twice.
std::optional<CaseOutcome> Campaign::run_one(size_t k, const Case& c, VerdictClass cls) const {
  try {
    return run_campaign_kernel(o_.kernels[k], runner_, c, cls == VerdictClass::Nondeterministic);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string Campaign::repro_command(size_t k, const std::string& path, VerdictClass cls) const {
  return repro_command_line(o_.kernels[k].origin, runner_.options(), path, cls);
}

// A raw signature met for the first time, as `f` (its minimized or saved
// repro).  The ledger keeps it; the per-signature failures follow the rule
// that consolidate_failures applies to merged shards: the first repro of a
// signature stays unless a later raw signature brings a strictly smaller
// one, which takes its place, status and occurrences.
void Campaign::add_raw(ReportFailure f, const CaseSize& size) {
  report_.note_raw_failure(f);
  raw_to_signature_[f.raw_signature] = f.signature;
  auto it = by_signature_.find(f.signature);
  if (it == by_signature_.end()) {
    by_signature_[f.signature] = report_.failures.size();
    best_size_[f.signature] = size;
    report_.failures.push_back(std::move(f));
    if (o_.on_failure) o_.on_failure(report_.failures.back());
    return;
  }
  ReportFailure& kept = report_.failures[it->second];
  ++kept.occurrences;
  if (size < best_size_[f.signature]) {
    best_size_[f.signature] = size;
    f.occurrences = kept.occurrences;
    f.status = kept.status;
    kept = std::move(f);
  }
}

void Campaign::failure(const CaseWork& w, size_t k) {
  const CampaignKernel& slot = o_.kernels[k];
  const afz_kernel& kernel = *slot.kernel;
  const VerdictClass cls = w.outcomes[k].verdict.cls;
  // A backward failure's gradient is part of what it is: minimization keeps it.
  const std::string gradient = failure_gradient(slot, w.outcomes[k].verdict);
  const std::string raw = signature_of(kernel.name, cls, w.c, gradient).text();

  // Seen in this run: one more occurrence.
  if (auto it = raw_to_signature_.find(raw); it != raw_to_signature_.end()) {
    report_.count_raw_occurrence(raw);
    ++report_.failures[by_signature_[it->second]].occurrences;
    return;
  }

  ReportFailure f;
  f.kernel = kernel.name;
  f.verdict = cls;
  f.pass = slot.backward ? "bwd" : "";
  f.gradient = gradient;
  f.raw_signature = raw;
  f.generator = w.generator->name;
  f.seed = o_.seed;
  f.case_index = w.index;
  f.occurrences = 1;

  // Saved by an earlier run (resume): confirm that its repro still fails
  // the same way, and take it without minimizing again.
  if (corpus_) {
    if (const CorpusEntry* e = corpus_->find_seen(raw)) {
      if (auto again = run_one(k, e->c, cls); again && again->verdict.cls == cls) {
        f.signature = e->signature;
        f.status = known_at_start_.count(e->signature) ? "known" : "new";
        f.detail = again->verdict.detail;
        f.worst = again->verdict.worst;
        f.case_file = e->path;
        f.repro = repro_command(k, e->path, cls);
        f.case_text = write_case(e->c);
        f.minimize.from_elements = f.minimize.to_elements = e->size.elements;
        add_raw(std::move(f), e->size);
        return;
      }
    }
  }

  // New: minimize while the kernel keeps failing with the same verdict.
  Stopwatch minimize_time;
  CaseOutcome last = w.outcomes[k];
  MinimizeResult mr;
  if (o_.minimize) {
    auto still_fails = [&](const Case& cand) {
      std::optional<CaseOutcome> out = run_one(k, cand, cls);
      if (!out || !same_failure(slot, w.outcomes[k].verdict, out->verdict)) return false;
      last = *out;  // the verdict of the case minimize keeps
      return true;
    };
    mr = minimize_case(w.c, still_fails, o_.minimize_options);
  } else {
    mr.best = w.c;
    mr.from = mr.to = case_size(w.c);
  }
  report_.timing.minimize_s += minimize_time.seconds();

  Case best = mr.best;
  stamp_failure_case(slot, best);
  f.signature = signature_of(kernel.name, cls, best, gradient).text();
  f.detail = last.verdict.detail;
  f.worst = last.verdict.worst;
  f.minimize = {mr.from.elements, mr.to.elements, mr.runs, mr.seconds, mr.exhausted};
  f.status = known_at_start_.count(f.signature) ? "known" : "new";
  best.provenance = failure_provenance(f, utc_now());
  CaseSize size = case_size(best);
  if (corpus_) {
    std::string path, error;
    const std::optional<Corpus::Saved> saved = corpus_->save(best, f.signature, raw, &path, &error);
    if (!saved) throw std::runtime_error(error);
    const CorpusEntry& e = *corpus_->find(f.signature);
    if (*saved == Corpus::Saved::Smaller && f.status == "known") f.status = "smaller";
    if (*saved == Corpus::Saved::KeptExisting) {
      // The corpus holds a repro no larger: report that one, with its verdict.
      if (auto again = run_one(k, e.c, cls)) {
        f.detail = again->verdict.detail;
        f.worst = again->verdict.worst;
      }
      size = e.size;
    }
    f.case_file = path;
    f.repro = repro_command(k, path, cls);
    f.case_text = write_case(e.c);
  } else {
    f.case_text = write_case(best);
  }
  add_raw(std::move(f), size);
}

void Campaign::consume(CaseWork& w) {
  // A case that ran nowhere because the GPU was lost was not run.
  if (w.error.empty() && !w.outcomes.empty() && std::all_of(w.outcomes.begin(), w.outcomes.end(), lost_to_gpu)) return;
  ++consumed_;
  const size_t g = generator_index_[w.generator];
  ++class_cases_[g];
  report_.timing.generate_s += w.generate_s;
  report_.timing.oracle_s += w.oracle_s;
  report_.run.reruns += w.reruns;
  ReportCase rc;
  rc.index = w.index;
  rc.generator = w.generator->name;
  if (!w.error.empty()) {
    report_.errors.push_back("case " + std::to_string(w.index) + " (" + w.generator->name + "): " + w.error);
    if (o_.keep_case_records) report_.record_case(std::move(rc));
    return;
  }
  bool failed = false;
  const size_t classes = o_.mix.entries().size();
  for (size_t k = 0; k < o_.kernels.size(); ++k) {
    const CaseOutcome& out = w.outcomes[k];
    if (lost_to_gpu(out)) {  // not run: in no cell
      rc.verdicts.push_back(out.verdict.cls);
      continue;
    }
    ReportCell& cell = report_.cells[k * classes + g];
    ++cell.cases;
    ++cell.by_verdict[size_t(out.verdict.cls)];
    report_.timing.kernel_s += out.timing.kernel;
    report_.timing.judge_s += out.timing.judge;
    kernel_s_[k] += out.timing.kernel;
    rc.verdicts.push_back(out.verdict.cls);
    if (out.verdict.cls == VerdictClass::Unsupported) ++unsupported_;
    else report_.add_error_stats(o_.kernels[k].kernel->name, out.verdict);
    if (!is_failure(out.verdict.cls)) continue;
    failed = true;
    failure(w, k);
  }
  failing_cases_ += failed ? 1 : 0;
  if (o_.keep_case_records) report_.record_case(std::move(rc));
}

ProgressSnapshot Campaign::snapshot() const {
  ProgressSnapshot s;
  s.elapsed_s = clock_.seconds();
  s.cases = consumed_;
  s.case_limit = o_.cases;
  s.time_limit_s = o_.time_s;
  s.new_failures = report_.new_failures();
  s.failing_cases = failing_cases_;
  s.unsupported = unsupported_;
  const auto& entries = o_.mix.entries();
  for (size_t g = 0; g < entries.size(); ++g) s.per_class.emplace_back(entries[g].gen->name, class_cases_[g]);
  return s;
}

Report Campaign::run() {
  const int64_t begin = o_.first_case;
  const int64_t end = o_.cases >= 0 ? begin + o_.cases : INT64_MAX;
  auto out_of_time = [&] { return o_.time_s >= 0 && clock_.seconds() >= o_.time_s; };
  auto enough_failures = [&] {
    return o_.stop_after_failures >= 0 && int64_t(report_.failures.size()) >= o_.stop_after_failures;
  };
  auto stop_reason_now = [&](std::string& reason) {
    if (out_of_time()) reason = "time";
    if (enough_failures()) reason = "failures";
    if (stop_requested()) reason = "signal";
    if (!gpu::gpu_lost_reason().empty()) reason = kGpuLostStopReason;
    return reason != "cases";
  };
  std::string stop_reason = "cases";

  // Workers take indices in order and may run ahead of the consumer by a
  // bounded window; the consumer takes results strictly in index order.
  run_in_order(
      begin, end, o_.jobs, int64_t(o_.jobs) * kLookaheadPerJob, [&](int64_t i) { return run_case(o_, runner_, i); },
      [&](int64_t) { return !stop_reason_now(stop_reason); },
      [&](int64_t, CaseWork&& w) {
        consume(w);
        after_case();
      });
  return finish(stop_reason);
}

// A loss met while the last cases ran (after the last check) is a loss too:
// their outcomes were dropped (consume).
Report Campaign::finish(const std::string& stop_reason) {
  if (gpu::gpu_lost_reason().empty()) return assemble(stop_reason);
  report_.errors.push_back(gpu_lost_note(consumed_, "cases"));
  return assemble(kGpuLostStopReason);
}

// The report as of now: a copy, so a checkpoint can be written while the
// campaign goes on (bounded: see report.h).
Report Campaign::assemble(const std::string& stop_reason) const {
  Report r = report_;
  ReportRun& run = r.run;
  run.kind = "campaign";
  run.command = o_.command;
  run.seed = o_.seed;
  run.first_case = o_.first_case;
  run.cases = consumed_;
  run.case_limit = o_.cases;
  run.time_limit_s = o_.time_s;
  run.stop_reason = stop_reason;
  run.jobs = o_.jobs;
  run.oracle = runner_.oracle_name();
  run.classes = o_.mix.describe();
  run.corpus = o_.corpus_dir;
  run.rerun_share = runner_.options().check_determinism ? 1 : o_.rerun_share;  // --determinism: every case
  r.failing_case_count = failing_cases_;  // `cases` holds only the first kCaseRecordLimit
  run.wall_s = clock_.seconds();
  run.started_utc = started_utc_;
  for (size_t k = 0; k < o_.kernels.size(); ++k) {
    const afz_kernel& kernel = *o_.kernels[k].kernel;
    r.kernels.push_back({kernel.name, o_.kernels[k].origin, kernel.description ? kernel.description : "",
                         masked_row_name(kernel.conventions.masked_row_output),
                         empty_lse_name(kernel.conventions.empty_lse), kernel_s_[k],
                         split_between(timing_at_start_[k], library_kernel_timing(kernel))});
    if (o_.kernels[k].backward) r.kernels.back().pass = "bwd";
  }
  const auto& entries = o_.mix.entries();
  for (size_t g = 0; g < entries.size(); ++g)
    r.generators.push_back({entries[g].gen->name, entries[g].weight, class_cases_[g]});
  std::erase_if(r.cells, [](const ReportCell& c) { return c.cases == 0; });
  r.timing.wall_s = run.wall_s;
  r.timing.cases_per_second = run.wall_s > 0 ? double(consumed_) / run.wall_s : 0;
  return r;
}

void Campaign::after_case() {
  if (o_.on_progress) o_.on_progress(snapshot());
  if (!o_.on_checkpoint || o_.checkpoint_s < 0 || clock_.seconds() - last_checkpoint_s_ < o_.checkpoint_s) return;
  last_checkpoint_s_ = clock_.seconds();
  o_.on_checkpoint(assemble(kRunningStopReason));
}

}  // namespace

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string masked_row_name(afz_masked_row_output c) { return c == AFZ_MASKED_ROW_NAN ? "nan" : "zero"; }

std::string empty_lse_name(afz_empty_lse c) {
  switch (c) {
    case AFZ_EMPTY_LSE_POS_INF: return "+inf";
    case AFZ_EMPTY_LSE_NAN: return "nan";
    case AFZ_EMPTY_LSE_ZERO: return "0";
    default: return "-inf";
  }
}

std::vector<std::string> failure_provenance(const ReportFailure& f, const std::string& date_utc) {
  // Provenance entries are one trimmed line each: control characters in a
  // kernel's message become blanks.
  auto line = [](std::string s) {
    for (char& ch : s)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
    const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  std::vector<std::string> p;
  p.push_back(line("found by attnfuzz " + std::string(kAttnfuzzVersion) + " fuzz on " + date_utc));
  p.push_back(line("kernel " + f.kernel));
  if (!f.pass.empty()) p.push_back(line("pass " + f.pass + (f.gradient.empty() ? "" : " gradient " + f.gradient)));
  p.push_back(line("campaign seed " + std::to_string(f.seed) + " case " + std::to_string(f.case_index) + " class " +
                   f.generator));
  p.push_back(line("verdict " + std::string(verdict_name(f.verdict)) + (f.detail.empty() ? "" : ": " + f.detail)));
  if (f.worst.valid) p.push_back(line("worst " + f.worst.format()));
  p.push_back(line("minimized from " + std::to_string(f.minimize.from_elements) + " to " +
                   std::to_string(f.minimize.to_elements) + " input elements in " +
                   std::to_string(f.minimize.runs) + " runs"));
  return p;
}

std::vector<std::string> verdict_provenance(const ReportFailure& f) {
  std::vector<std::string> p = failure_provenance(f, "");
  std::erase_if(p, [](const std::string& line) {
    return !(line.starts_with("pass ") || line.starts_with("verdict ") || line.starts_with("worst ") ||
             line.starts_with("minimized "));
  });
  return p;
}

ReplayResult replay_corpus(const ReplayOptions& o, const KernelRegistry& registry, const Runner& runner,
                           std::FILE* out, std::FILE* err) {
  auto say = [](std::FILE* f, const std::string& line) {
    if (f) fmt::print(f, "{}\n", line);
  };
  ReplayResult res;
  Report& r = res.report;
  r.run.kind = "replay";
  r.run.command = o.command;
  r.run.oracle = runner.oracle_name();
  r.run.started_utc = utc_now();
  r.run.stop_reason = "corpus";
  const Stopwatch clock;
  std::vector<std::string> files;
  for (const std::string& dir : o.dirs) {
    std::string error;
    auto listed = list_case_files(dir, &error);
    if (!listed) {
      say(err, error);
      res.bad_input = true;
      continue;
    }
    files.insert(files.end(), listed->begin(), listed->end());
    r.run.corpus += (r.run.corpus.empty() ? "" : " ") + dir;
  }
  // One report slot per (kernel, pass): a backward kernel reads "NAME [bwd]",
  // apart from a forward kernel of the same name.
  auto slot_for = [&](const std::string& name, const std::string& origin, const char* description,
                      const afz_conventions& conv, const std::string& pass) {
    for (size_t n = 0; n < r.kernels.size(); ++n)
      if (r.kernels[n].name == name) return n;
    r.kernels.push_back({name, origin, description ? description : "", masked_row_name(conv.masked_row_output),
                         empty_lse_name(conv.empty_lse), 0});
    r.kernels.back().pass = pass;
    return r.kernels.size() - 1;
  };
  auto slot_of = [&](const CampaignKernel& k) {
    return slot_for(k.kernel->name, k.origin, k.kernel->description, k.kernel->conventions, "");
  };
  for (const CampaignKernel& k : o.kernels) slot_of(k);
  std::unique_ptr<BackwardOracle> backward_fast, backward_precise;
  for (const std::string& file : files) {
    std::string error;
    std::optional<Case> c = load_case_file(file, &error);
    if (!c) {
      say(err, error);
      res.bad_input = true;
      continue;
    }
    const Pass pass = o.pass.value_or(c->pass);
    std::vector<CampaignKernel> kernels;
    if (pass != Pass::Bwd) {
      kernels = o.kernels;
      if (kernels.empty()) {
        for (const KernelEntry& e : registry.entries())
          if (c->kernel == e.kernel->name) kernels.push_back({e.kernel, e.origin});
        if (kernels.empty()) {
          say(err, file + ": field 'kernel': " +
                       (c->kernel.empty() ? "the file names no kernel" : "unknown kernel '" + c->kernel + "'") +
                       " (pass --kernel)");
          res.bad_input = true;
          continue;
        }
      }
    }
    std::vector<const BackwardKernelEntry*> backward;
    if (pass != Pass::Fwd) {
      // Kernels named on the command line replace the file's own, for both passes.
      const bool named = !o.kernels.empty() || !o.backward_kernels.empty();
      const std::vector<std::string> names = named ? o.backward_kernels : std::vector<std::string>{c->kernel};
      for (const std::string& name : names)
        if (const BackwardKernelEntry* e = registry.backward_entry(name)) backward.push_back(e);
      if (backward.empty()) {
        const std::string why = named              ? "none of the kernels named is a backward kernel"
                                : c->kernel.empty() ? "the file names no kernel"
                                                    : "no backward kernel '" + c->kernel + "'";
        say(err, fmt::format("{}: field 'kernel': {} for pass {} (pass --kernel)", file, why, pass_name(pass)));
        res.bad_input = true;
        continue;
      }
    }
    ++res.files;
    ReportCase rc;
    rc.index = int64_t(r.cases.size());
    rc.generator = "corpus";
    // What a repro of a failure needs beyond the file: the failing pass alone
    // where the file records another, the kernel when the run named one.
    auto tally = [&](size_t slot, const std::string& kernel, Pass failing_pass, const std::string& kernel_flag,
                     const Verdict& v) {
      const std::string pass_flag =
          failing_pass == c->pass ? "" : "--pass " + std::string(pass_name(failing_pass)) + " ";
      ReportCell& cell = r.cell(kernel, "corpus");
      ++cell.cases;
      ++cell.by_verdict[size_t(v.cls)];
      rc.verdicts.resize(r.kernels.size(), VerdictClass::Unsupported);
      rc.verdicts[slot] = v.cls;
      ++res.runs;
      res.passed += v.cls == VerdictClass::Pass;
      res.unsupported += v.cls == VerdictClass::Unsupported;
      if (v.cls != VerdictClass::Unsupported) r.add_error_stats(kernel, v);
      if (o.verbose || is_failure(v.cls))
        say(out, fmt::format("{}: {}: {}{}", file, kernel, verdict_name(v.cls),
                             v.detail.empty() ? "" : " (" + v.detail + ")"));
      if (!is_failure(v.cls)) return;
      ++res.failed;
      ReportFailure f;
      f.kernel = kernel;
      f.verdict = v.cls;
      if (failing_pass == Pass::Bwd) {
        f.pass = "bwd";
        f.gradient = failing_gradient(v);
      }
      f.signature = provenance_value(*c, kProvSignature);
      if (f.signature.empty()) f.signature = signature_of(f.kernel, v.cls, *c, f.gradient).text();
      f.raw_signature = f.signature;
      f.status = "new";  // a corpus case failing again is a regression
      f.generator = "corpus";
      f.occurrences = 1;
      f.detail = v.detail;
      f.worst = v.worst;
      f.case_file = file;
      f.repro = "attnfuzz repro " + pass_flag + kernel_flag + file;
      f.case_text = write_case(*c);
      if (v.worst.valid) say(out, "  worst " + v.worst.format());
      say(out, "  repro: " + f.repro);
      r.failures.push_back(std::move(f));
    };
    for (const CampaignKernel& k : kernels) {
      const size_t slot = slot_of(k);
      CaseOutcome outcome;
      try {
        outcome = runner.run(*k.kernel, *c);
      } catch (const std::exception& e) {
        say(err, file + ": " + e.what());
        res.bad_input = true;
        continue;
      }
      r.kernels[slot].kernel_s += outcome.timing.kernel;
      r.timing.generate_s += outcome.timing.generate;
      r.timing.oracle_s += outcome.timing.oracle;
      r.timing.kernel_s += outcome.timing.kernel;
      r.timing.judge_s += outcome.timing.judge;
      tally(slot, k.kernel->name, Pass::Fwd,
            o.kernels.empty() ? "" : "--kernel " + std::string(k.kernel->name) + " ", outcome.verdict);
    }
    for (const BackwardKernelEntry* e : backward) {
      const std::string name = backward_label(e->kernel->name);
      const size_t slot = slot_for(name, e->origin, e->kernel->description, e->kernel->conventions, "bwd");
      if (!backward_fast) {
        backward_fast = make_fast_backward_oracle();
        backward_precise = make_escalation_backward_oracle();
      }
      BackwardOutcome outcome;
      try {
        outcome = run_backward_case(*e->kernel, *c, *backward_fast, backward_precise.get(),
                                    runner.options().check_determinism, runner.options().timeout_s);
      } catch (const std::exception& ex) {
        say(err, file + ": " + ex.what());
        res.bad_input = true;
        continue;
      }
      tally(slot, name, Pass::Bwd,
            o.backward_kernels.empty() ? "" : "--kernel " + std::string(e->kernel->name) + " ", outcome.verdict);
    }
    rc.verdicts.resize(r.kernels.size(), VerdictClass::Unsupported);
    r.cases.push_back(std::move(rc));
  }
  r.run.cases = int64_t(r.cases.size());
  r.run.wall_s = r.timing.wall_s = clock.seconds();
  r.timing.cases_per_second = r.run.wall_s > 0 ? double(r.run.cases) / r.run.wall_s : 0;
  return res;
}

std::string backward_label(const std::string& name) { return name + " [bwd]"; }

CampaignKernel backward_campaign_kernel(const afz_backward_kernel& k, const std::string& origin) {
  // The view's strings live beside it: the afz_kernel only points at them.
  struct View {
    std::string name, description;
    afz_kernel kernel{};
  };
  auto view = std::make_shared<View>();
  view->name = backward_label(k.name);
  view->description = k.description ? k.description : "";
  view->kernel.name = view->name.c_str();
  view->kernel.description = view->description.c_str();
  view->kernel.caps = k.caps;
  view->kernel.precision = k.precision;
  view->kernel.conventions = k.conventions;
  // run stays null: the view is never run (run_campaign_kernel runs `backward`).
  CampaignKernel out;
  out.backward_view = std::shared_ptr<const afz_kernel>(view, &view->kernel);
  out.kernel = out.backward_view.get();
  out.origin = origin;
  out.backward = &k;
  return out;
}

namespace {

// The backward oracles of every backward slot: stateless, so one pair
// serves every worker thread.
struct BackwardOracles {
  std::unique_ptr<BackwardOracle> fast = make_fast_backward_oracle();
  std::unique_ptr<BackwardOracle> precise = make_escalation_backward_oracle();
};
const BackwardOracles& backward_oracles() {
  static const BackwardOracles oracles;
  return oracles;
}

CaseOutcome run_backward_slot(const CampaignKernel& k, const Runner& runner, const Case& c, bool rerun) {
  const BackwardOracles& oracles = backward_oracles();
  CaseOutcome out;
  try {
    const BackwardOutcome b = run_backward_case(*k.backward, c, *oracles.fast, oracles.precise.get(),
                                                rerun || runner.options().check_determinism,
                                                runner.options().timeout_s);
    out.verdict = b.verdict;
    out.timing = b.timing;
    out.reran = b.reran;
  } catch (const NoExactGradients& e) {
    // The gradients of non-finite inputs do not exist: the case says
    // nothing about the kernel.
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = std::string("no exact gradients: ") + e.what();
  }
  return out;
}

}  // namespace

CaseOutcome run_campaign_kernel(const CampaignKernel& k, const Runner& runner, const Case& c, Materialized& m,
                                OracleResult* reference, bool rerun) {
  if (k.backward) return run_backward_slot(k, runner, c, rerun);
  return runner.run(*k.kernel, m, reference, rerun);
}

CaseOutcome run_campaign_kernel(const CampaignKernel& k, const Runner& runner, const Case& c, bool rerun) {
  // Minimization and resumes start from the case: past a budget, nothing is built.
  if (std::string why = runner.declined_before_inputs(*k.kernel, c, k.backward != nullptr); !why.empty()) {
    CaseOutcome out;
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = why;
    return out;
  }
  if (k.backward) return run_backward_slot(k, runner, c, rerun);
  Materialized m(c);
  return runner.run(*k.kernel, m, nullptr, rerun);
}

bool lost_to_gpu(const CaseOutcome& out) {
  return out.verdict.cls == VerdictClass::Unsupported && gpu::is_gpu_lost_detail(out.verdict.detail);
}

std::string gpu_lost_note(int64_t done, const std::string& unit) {
  return fmt::format("stopped: the GPU was lost after {} {}: {}; the {} since then were not run", done, unit,
                     gpu::gpu_lost_reason(), unit);
}

std::string failure_gradient(const CampaignKernel& k, const Verdict& v) {
  return k.backward ? failing_gradient(v) : "";
}

std::string crash_kind(std::string_view detail) {
  auto isalnum = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
  auto isdigit = [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; };
  auto run_from = [&](size_t at, auto keep) {  // detail[at..] while keep(char)
    size_t end = at;
    while (end < detail.size() && keep(detail[end])) ++end;
    return std::string(detail.substr(at, end - at));
  };
  if (size_t at = detail.find("cudaError"); at != std::string_view::npos) return run_from(at, isalnum);
  constexpr std::string_view kSignal = "signal ";
  if (size_t at = detail.find(kSignal); at != std::string_view::npos)
    return std::string(kSignal) + run_from(at + kSignal.size(), isdigit);
  std::string kind;
  for (char ch : detail)
    if (!isdigit(ch)) kind += ch;
    else if (kind.empty() || kind.back() != '#') kind += '#';
  return kind;
}

bool same_failure(const CampaignKernel& k, const Verdict& first, const Verdict& candidate) {
  if (candidate.cls != first.cls || failure_gradient(k, candidate) != failure_gradient(k, first)) return false;
  return first.cls != VerdictClass::Crash || crash_kind(candidate.detail) == crash_kind(first.detail);
}

void stamp_failure_case(const CampaignKernel& k, Case& c) {
  c.kernel = k.backward ? k.backward->name : k.kernel->name;
  c.pass = k.pass();
}

Report run_campaign(const CampaignOptions& options, const Runner& runner) {
  Campaign c(options, runner);
  return c.run();
}

std::vector<std::string> repro_arguments(const std::string& origin, const RunOptions& run, const std::string& path,
                                         VerdictClass verdict) {
  std::vector<std::string> args;
  if (!is_builtin_origin(origin)) args.insert(args.end(), {"--kernel-lib", origin});
  if (run.check_determinism || verdict == VerdictClass::Nondeterministic) args.push_back("--determinism");
  if (run.isolate) args.push_back("--isolate");
  args.insert(args.end(), {"repro", path});
  return args;
}

std::string repro_command_line(const std::string& origin, const RunOptions& run, const std::string& path,
                               VerdictClass verdict) {
  std::string cmd = "attnfuzz";
  for (const std::string& a : repro_arguments(origin, run, path, verdict)) cmd += " " + a;
  return cmd;
}

}  // namespace afz
