// The raw-signature ledger, error statistics, failure consolidation and
// `report merge`: everything that combines report data.
#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "harness/case/case.h"
#include "harness/case/case_features.h"
#include "harness/report/report_views.h"
#include "kernels/abi/dtype.h"

namespace afz {

void Report::add_error_stats(const std::string& kernel, const Verdict& v) {
  auto add = [&](const std::string& series, const ErrorSeries& s) {
    if (s.empty()) return;
    // Kept sorted by (kernel, series): the order is then the same however
    // the statistics arrived, case by case or shard by shard.
    auto it = std::lower_bound(error_stats.begin(), error_stats.end(), std::pair(kernel, series),
                               [](const ReportErrorStats& e, const std::pair<std::string, std::string>& key) {
                                 return std::tie(e.kernel, e.series) < std::tie(key.first, key.second);
                               });
    if (it == error_stats.end() || it->kernel != kernel || it->series != series)
      it = error_stats.insert(it, ReportErrorStats{kernel, series, {}});
    it->stats.merge(s);
  };
  add("o." + std::string(dtype_name(v.o_dtype)), v.o_stats);
  add("lse", v.lse_stats);
  for (size_t g = 0; g < kGradientNames.size(); ++g) add(std::string(kGradientNames[g]), v.grad_stats[g]);
}

void Report::record_case(ReportCase c) {
  if (cases.size() < kCaseRecordLimit) cases.push_back(std::move(c));
}

void Report::note_raw_failure(const ReportFailure& f) {
  if (raw_failures.size() >= kRawSignatureLimit) {
    raw_failures_complete = false;
    return;
  }
  raw_failures.push_back(f);
  raw_failures.back().occurrences = 1;
}

void Report::append_raw_failures(const Report& other) {
  raw_failures_complete &= other.raw_failures_complete;
  for (const ReportFailure& f : other.raw_failures) {
    if (raw_failures.size() >= kRawSignatureLimit) {
      raw_failures_complete = false;
      return;
    }
    raw_failures.push_back(f);
  }
}

void Report::count_raw_occurrence(const std::string& raw_signature) {
  // At most kRawSignatureLimit entries: the scan costs less than the case did.
  for (ReportFailure& f : raw_failures)
    if (f.raw_signature == raw_signature) {
      ++f.occurrences;
      return;
    }
}

CaseSize repro_size(const ReportFailure& f) {
  ParseError e;
  if (std::optional<Case> c = parse_case(f.case_text, &e)) return case_size(*c);
  return {f.minimize.to_elements, 0};
}

void ReportAudit::count_unsupported(const std::string& reason) {
  auto it = unsupported_reasons.find(reason);
  if (it == unsupported_reasons.end() && unsupported_reasons.size() >= kMaxUnsupportedReasons)
    it = unsupported_reasons.try_emplace(kOtherReasons, 0).first;
  else if (it == unsupported_reasons.end())
    it = unsupported_reasons.try_emplace(reason, 0).first;
  ++it->second;
}

namespace {

struct KernelRank {
  std::map<std::string, size_t> rank;
  explicit KernelRank(const std::vector<std::string>& order) {
    for (size_t i = 0; i < order.size(); ++i) rank.emplace(order[i], i);
  }
  size_t operator()(const std::string& kernel) const {
    auto it = rank.find(kernel);
    return it == rank.end() ? rank.size() : it->second;
  }
};

// Raw entries in the order the campaign meets them: case order, then kernel order.
void sort_found_order(std::vector<ReportFailure>& v, const KernelRank& rank) {
  std::stable_sort(v.begin(), v.end(), [&](const ReportFailure& a, const ReportFailure& b) {
    return std::pair(a.case_index, rank(a.kernel)) < std::pair(b.case_index, rank(b.kernel));
  });
}

// One entry per raw signature: the earliest, with every part's occurrences.
std::vector<ReportFailure> dedupe_raw(std::vector<ReportFailure> raw, const KernelRank& rank) {
  sort_found_order(raw, rank);
  std::vector<ReportFailure> out;
  std::map<std::string, size_t> at;
  for (ReportFailure& f : raw) {
    if (auto it = at.find(f.raw_signature); it != at.end()) {
      out[it->second].occurrences += f.occurrences;
      continue;
    }
    at.emplace(f.raw_signature, out.size());
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::vector<ReportFailure> consolidate_failures(std::vector<ReportFailure> raw,
                                                const std::vector<std::string>& kernel_order) {
  const KernelRank rank(kernel_order);
  std::vector<ReportFailure> out;
  std::vector<CaseSize> sizes;
  std::map<std::string, size_t> at;
  for (ReportFailure& f : dedupe_raw(std::move(raw), rank)) {
    const CaseSize size = repro_size(f);
    auto it = at.find(f.signature);
    if (it == at.end()) {
      at.emplace(f.signature, out.size());
      out.push_back(std::move(f));
      sizes.push_back(size);
      continue;
    }
    // The same bug reached from another raw signature: a strictly smaller
    // repro replaces the kept one (ties keep the earlier), which keeps its
    // place, its status and the occurrences of all.
    ReportFailure& kept = out[it->second];
    kept.occurrences += f.occurrences;
    if (size < sizes[it->second]) {
      f.occurrences = kept.occurrences;
      f.status = kept.status;
      kept = std::move(f);
      sizes[it->second] = size;
    }
  }
  return out;
}

namespace {

// Failures of parts without a ledger: per signature (a corpus file without
// one stands for itself) the smallest repro, ties to the earliest case.
std::vector<ReportFailure> smallest_per_signature(std::vector<ReportFailure> all, const KernelRank& rank) {
  sort_found_order(all, rank);
  std::vector<ReportFailure> out;
  std::vector<CaseSize> sizes;
  std::map<std::tuple<std::string, VerdictClass, std::string>, size_t> at;
  for (ReportFailure& f : all) {
    const auto key = std::tuple(f.kernel, f.verdict, f.signature.empty() ? "file:" + f.case_file : f.signature);
    const CaseSize size = repro_size(f);
    auto it = at.find(key);
    if (it == at.end()) {
      at.emplace(key, out.size());
      out.push_back(std::move(f));
      sizes.push_back(size);
      continue;
    }
    ReportFailure& kept = out[it->second];
    kept.occurrences += f.occurrences;
    if (size < sizes[it->second]) {
      f.occurrences = kept.occurrences;
      f.status = kept.status;
      kept = std::move(f);
      sizes[it->second] = size;
    }
  }
  return out;
}

// Names in first-seen order across parts.
struct Order {
  std::vector<std::string> names;
  std::map<std::string, size_t> at;
  size_t add(const std::string& name) {
    auto [it, inserted] = at.emplace(name, names.size());
    if (inserted) names.push_back(name);
    return it->second;
  }
  size_t operator[](const std::string& name) const { return at.at(name); }
};

int severity(VerdictClass v) { return int(v); }

std::string status_merge(const std::string& a, const std::string& b) {
  for (const char* s : {"fail", "pass", "unsupported"})
    if (a == s || b == s) return s;
  return a.empty() ? b : a;
}

class Merger {
 public:
  explicit Merger(std::vector<Report> parts) : parts_(std::move(parts)) {}

  std::optional<Report> run(std::string* error) {
    if (parts_.empty()) return fail(error, "report merge: no reports to merge");
    const std::string kind = parts_[0].run.kind;
    for (const Report& p : parts_)
      if (p.run.kind != kind)
        return fail(error, "report merge: cannot merge a " + p.run.kind + " report with a " + kind + " report");
    campaign_ = kind == "campaign";
    if (campaign_) {
      std::stable_sort(parts_.begin(), parts_.end(),
                       [](const Report& a, const Report& b) { return a.run.first_case < b.run.first_case; });
      if (!check_campaign(error)) return std::nullopt;
    }
    merge_run();
    merge_kernels_and_generators();
    if (!merge_cases(error)) return std::nullopt;
    merge_cells();
    merge_failures();
    merge_timing();
    merge_errors();
    merge_error_stats();
    merge_audits();
    merge_mutants();
    return std::move(out_);
  }

 private:
  static std::optional<Report> fail(std::string* error, std::string message) {
    *error = std::move(message);
    return std::nullopt;
  }

  bool check_campaign(std::string* error) {
    const ReportRun& a = parts_[0].run;
    auto names = [](const Report& r) {
      std::set<std::string> s;
      for (const ReportKernel& k : r.kernels) s.insert(k.name);
      return s;
    };
    for (const Report& p : parts_) {
      const ReportRun& b = p.run;
      std::string what;
      if (b.seed != a.seed) what = fmt::format("seeds {} and {}", a.seed, b.seed);
      else if (b.classes != a.classes) what = "generator mixes '" + a.classes + "' and '" + b.classes + "'";
      else if (b.oracle != a.oracle) what = "oracles " + a.oracle + " and " + b.oracle;
      else if (names(p) != names(parts_[0])) what = "different kernels";
      if (!what.empty()) {
        *error = "report merge: these are not shards of one campaign (" + what + ")";
        return false;
      }
    }
    // Shards cover disjoint case ranges.
    for (size_t i = 1; i < parts_.size(); ++i) {
      const ReportRun& prev = parts_[i - 1].run;
      const ReportRun& cur = parts_[i].run;
      if (prev.cases > 0 && cur.cases > 0 && cur.first_case < prev.first_case + prev.cases) {
        *error = fmt::format("report merge: shards overlap: cases [{}, {}) and [{}, {})", prev.first_case,
                             prev.first_case + prev.cases, cur.first_case, cur.first_case + cur.cases);
        return false;
      }
    }
    return true;
  }

  void merge_run() {
    ReportRun& r = out_.run;
    r = parts_[0].run;
    bool limited = true, timed = true;
    r.cases = r.case_limit = 0;
    r.time_limit_s = -1;
    r.jobs = 0;
    r.wall_s = 0;
    std::set<std::string> corpora;
    std::vector<std::string> corpus_order;
    for (const Report& p : parts_) {
      const ReportRun& b = p.run;
      r.first_case = std::min(r.first_case, b.first_case);
      r.cases += b.cases;
      limited &= b.case_limit >= 0;
      r.case_limit += std::max<int64_t>(b.case_limit, 0);
      timed &= b.time_limit_s >= 0;
      r.time_limit_s = std::max(r.time_limit_s, b.time_limit_s);
      r.jobs = std::max(r.jobs, b.jobs);
      r.wall_s = std::max(r.wall_s, b.wall_s);
      if (&p != &parts_[0]) r.reruns += b.reruns;
      if (!b.started_utc.empty() && (r.started_utc.empty() || b.started_utc < r.started_utc))
        r.started_utc = b.started_utc;
      if (b.stop_reason != r.stop_reason) r.stop_reason = b.stop_reason == "time" ? "time" : r.stop_reason;
      if (!b.corpus.empty() && corpora.insert(b.corpus).second) corpus_order.push_back(b.corpus);
    }
    if (!limited) r.case_limit = -1;
    if (!timed) r.time_limit_s = -1;
    r.corpus.clear();
    for (const std::string& c : corpus_order) r.corpus += (r.corpus.empty() ? "" : " ") + c;
  }

  void merge_kernels_and_generators() {
    for (const Report& p : parts_) {
      for (const ReportKernel& k : p.kernels) {
        const size_t i = kernels_.add(k.name);
        if (i == out_.kernels.size()) {
          out_.kernels.push_back(k);
          out_.kernels.back().kernel_s = 0;
          out_.kernels.back().split.reset();
        }
        out_.kernels[i].kernel_s += k.kernel_s;
        if (k.split) {
          ReportKernelSplit& s = out_.kernels[i].split.emplace(out_.kernels[i].split.value_or(ReportKernelSplit{}));
          s.calls += k.split->calls;
          s.compile_calls += k.split->compile_calls;
          s.compile_s += k.split->compile_s;
          s.run_s += k.split->run_s;
          s.copy_s += k.split->copy_s;
        }
      }
      for (const ReportGenerator& g : p.generators) {
        const size_t i = generators_.add(g.name);
        if (i == out_.generators.size()) {
          out_.generators.push_back(g);
          out_.generators.back().cases = 0;
        }
        out_.generators[i].cases += g.cases;
      }
      // Cells and cases may name classes the generator list does not (replays: "corpus").
      for (const ReportCell& c : p.cells) generators_.add(c.generator);
    }
  }

  bool merge_cases(std::string* error) {
    int64_t failing = 0;
    for (const Report& p : parts_) failing += p.failing_cases();
    out_.failing_case_count = failing;
    for (const Report& p : parts_)
      for (const ReportCase& c : p.cases) {
        ReportCase m{c.index, c.generator, std::vector<VerdictClass>(out_.kernels.size(), VerdictClass::Unsupported)};
        for (size_t k = 0; k < c.verdicts.size() && k < p.kernels.size(); ++k)
          m.verdicts[kernels_[p.kernels[k].name]] = c.verdicts[k];
        // A case a kernel never saw reads "unsupported", as in a replay;
        // shards of a campaign all ran every kernel, so their lists stay whole.
        if (c.verdicts.empty()) m.verdicts.clear();
        out_.cases.push_back(std::move(m));
      }
    if (!campaign_) {
      // Audits and replays number their cases per part (an audit shard's
      // cells start again at 0): no overlap to check, but the merged record
      // keeps the bound one run keeps, in part order.
      if (out_.cases.size() > kCaseRecordLimit) out_.cases.resize(kCaseRecordLimit);
      return true;
    }
    std::stable_sort(out_.cases.begin(), out_.cases.end(),
                     [](const ReportCase& a, const ReportCase& b) { return a.index < b.index; });
    for (size_t i = 1; i < out_.cases.size(); ++i)
      if (out_.cases[i].index == out_.cases[i - 1].index) {
        *error = fmt::format("report merge: case {} is in two of the reports: the shards overlap", out_.cases[i].index);
        return false;
      }
    // One run records its first kCaseRecordLimit cases; each is among the
    // first that many of its shard.
    if (out_.cases.size() > kCaseRecordLimit) out_.cases.resize(kCaseRecordLimit);
    return true;
  }

  void merge_cells() {
    std::map<std::pair<size_t, size_t>, ReportCell> cells;
    for (const Report& p : parts_)
      for (const ReportCell& c : p.cells) {
        ReportCell& m = cells[{kernels_.add(c.kernel), generators_.add(c.generator)}];
        m.kernel = c.kernel;
        m.generator = c.generator;
        m.cases += c.cases;
        for (size_t v = 0; v < m.by_verdict.size(); ++v) m.by_verdict[v] += c.by_verdict[v];
      }
    for (auto& [key, cell] : cells) out_.cells.push_back(std::move(cell));
  }

  void merge_failures() {
    const KernelRank rank(kernels_.names);
    // Exact while every part's ledger is whole; a part past
    // kRawSignatureLimit raw signatures (or one without a ledger) leaves only
    // the parts' own failures to combine.
    bool ledgers = true;
    std::vector<ReportFailure> raw, all;
    for (const Report& p : parts_) {
      if (!p.raw_failures_complete || (!p.failures.empty() && p.raw_failures.empty())) ledgers = false;
      raw.insert(raw.end(), p.raw_failures.begin(), p.raw_failures.end());
      all.insert(all.end(), p.failures.begin(), p.failures.end());
    }
    if (ledgers) out_.failures = consolidate_failures(raw, kernels_.names);
    else out_.failures = smallest_per_signature(std::move(all), rank);
    // One run lists the first kRawSignatureLimit raw signatures it meets:
    // each is among the first that many of the part it was met in.
    out_.raw_failures = dedupe_raw(std::move(raw), rank);
    out_.raw_failures_complete = ledgers && out_.raw_failures.size() <= kRawSignatureLimit;
    if (out_.raw_failures.size() > kRawSignatureLimit) out_.raw_failures.resize(kRawSignatureLimit);
  }

  void merge_timing() {
    ReportTiming& t = out_.timing;
    for (const Report& p : parts_) {
      const ReportTiming& b = p.timing;
      t.generate_s += b.generate_s;
      t.oracle_s += b.oracle_s;
      t.kernel_s += b.kernel_s;
      t.judge_s += b.judge_s;
      t.minimize_s += b.minimize_s;
      // Shards run side by side: the merged run took as long as the longest.
      t.wall_s = std::max(t.wall_s, b.wall_s);
    }
    t.cases_per_second = t.wall_s > 0 ? double(out_.run.cases) / t.wall_s : 0;
  }

  void merge_errors() {
    std::set<std::string> seen;
    for (const Report& p : parts_)
      for (const std::string& e : p.errors)
        if (seen.insert(e).second) out_.errors.push_back(e);  // a corpus error repeats in every shard
  }

  void merge_error_stats() {
    for (const Report& p : parts_)
      for (const ReportErrorStats& e : p.error_stats) {
        auto it = std::find_if(out_.error_stats.begin(), out_.error_stats.end(),
                               [&](const ReportErrorStats& m) { return m.kernel == e.kernel && m.series == e.series; });
        if (it == out_.error_stats.end()) out_.error_stats.push_back({e.kernel, e.series, {}});
        it = std::find_if(out_.error_stats.begin(), out_.error_stats.end(),
                          [&](const ReportErrorStats& m) { return m.kernel == e.kernel && m.series == e.series; });
        it->stats.merge(e.stats);
      }
    std::sort(out_.error_stats.begin(), out_.error_stats.end(), [](const ReportErrorStats& a, const ReportErrorStats& b) {
      return std::tie(a.kernel, a.series) < std::tie(b.kernel, b.series);
    });
  }

  void merge_audits() {
    Order kernels;
    for (const Report& p : parts_)
      for (const ReportAudit& a : p.audits) {
        const size_t i = kernels.add(a.kernel);
        if (i == out_.audits.size()) out_.audits.push_back({a.kernel, {}, {}, {}, {}, {}});
        ReportAudit& m = out_.audits[i];
        for (const std::string& row : a.rows)
          if (std::find(m.rows.begin(), m.rows.end(), row) == m.rows.end()) m.rows.push_back(row);
        for (const std::string& col : a.columns)
          if (std::find(m.columns.begin(), m.columns.end(), col) == m.columns.end()) m.columns.push_back(col);
        for (const std::string& note : a.notes)
          if (std::find(m.notes.begin(), m.notes.end(), note) == m.notes.end()) m.notes.push_back(note);
        for (const auto& [reason, n] : a.unsupported_reasons)
          for (int64_t c = 0; c < n; ++c) m.count_unsupported(reason);
        for (const ReportAuditCell& c : a.cells) {
          auto it = std::find_if(m.cells.begin(), m.cells.end(),
                                 [&](const ReportAuditCell& x) { return x.row == c.row && x.column == c.column; });
          if (it == m.cells.end()) {
            m.cells.push_back(c);
            continue;
          }
          it->cases += c.cases;
          it->status = status_merge(it->status, c.status);
          if (severity(c.verdict) > severity(it->verdict)) it->verdict = c.verdict;
          if (it->signature.empty()) it->signature = c.signature;
        }
      }
  }

  void merge_mutants() {
    Order kernels;
    std::vector<int64_t> cases_before;
    for (const Report& p : parts_)
      for (const ReportMutant& m : p.mutants) {
        const size_t i = kernels.add(m.kernel);
        if (i == out_.mutants.size()) {
          out_.mutants.push_back({m.kernel, false, 0, -1, -1, VerdictClass::Pass, ""});
          cases_before.push_back(0);
        }
        ReportMutant& o = out_.mutants[i];
        // The first part (in case order) that killed it, as if the parts had
        // run one after another.
        if (m.killed && !o.killed) {
          o.killed = true;
          o.cases_to_kill = cases_before[i] + m.cases_to_kill;
          o.seconds_to_kill = m.seconds_to_kill;
          o.verdict = m.verdict;
          o.signature = m.signature;
        }
        o.cases += m.cases;
        cases_before[i] += m.cases;
      }
  }

  std::vector<Report> parts_;
  bool campaign_ = false;
  Report out_;
  Order kernels_, generators_;
};

}  // namespace

std::optional<Report> merge_reports(std::vector<Report> parts, std::string* error) {
  return Merger(std::move(parts)).run(error);
}

}  // namespace afz
