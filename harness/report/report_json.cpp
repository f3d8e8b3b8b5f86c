// report.json: writer and reader of the Report model (schema in report.h).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "harness/case/atomic_file.h"
#include "harness/report/findings.h"
#include "harness/report/report.h"
#include "harness/report/report_views.h"

namespace afz {

using Json = nlohmann::ordered_json;

int64_t ReportCell::failed() const {
  int64_t n = 0;
  for (int c = 0; c < kVerdictClassCount; ++c)
    if (is_failure(VerdictClass(c))) n += by_verdict[size_t(c)];
  return n;
}

std::optional<ReportKernelSplit> split_between(const std::optional<afz_kernel_timing>& start,
                                               const std::optional<afz_kernel_timing>& end) {
  if (!end) return std::nullopt;
  const afz_kernel_timing s = start.value_or(afz_kernel_timing{});
  return ReportKernelSplit{end->calls - s.calls, end->compile_calls - s.compile_calls, end->compile_s - s.compile_s,
                           end->run_s - s.run_s, end->copy_s - s.copy_s};
}

ReportCell& Report::cell(const std::string& kernel, const std::string& generator) {
  for (ReportCell& c : cells)
    if (c.kernel == kernel && c.generator == generator) return c;
  cells.push_back({kernel, generator, 0, {}});
  return cells.back();
}

int64_t Report::new_failures() const {
  int64_t n = 0;
  for (const ReportFailure& f : failures) n += f.is_new() ? 1 : 0;
  return n;
}

int64_t Report::known_failures() const { return int64_t(failures.size()) - new_failures(); }

int64_t Report::failing_cases() const {
  if (failing_case_count) return *failing_case_count;
  int64_t n = 0;
  for (const ReportCase& c : cases)
    for (VerdictClass v : c.verdicts)
      if (is_failure(v)) {
        ++n;
        break;
      }
  return n;
}

std::optional<VerdictClass> parse_verdict_name(std::string_view name) {
  for (int c = 0; c < kVerdictClassCount; ++c)
    if (verdict_name(VerdictClass(c)) == name) return VerdictClass(c);
  return std::nullopt;
}

namespace {

// A double as JSON: a number when finite, null otherwise (JSON has no NaN).
Json number(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }
// The exact value, non-finite ones included: "0x1.8p+3", "inf", "-nan".
std::string hex(double x) { return fmt::format("{:a}", x); }

std::optional<double> parse_hex(std::string s) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.erase(0, 1);
  }
  double x = 0;
  std::from_chars_result res{};
  if (s.starts_with("0x")) {
    res = std::from_chars(s.data() + 2, s.data() + s.size(), x, std::chars_format::hex);
  } else {
    res = std::from_chars(s.data(), s.data() + s.size(), x);  // inf, nan
  }
  if (res.ec != std::errc() || res.ptr != s.data() + s.size()) return std::nullopt;
  return negative ? -x : x;
}

Json worst_json(const WorstElement& w) {
  Json j;
  j["valid"] = w.valid;
  if (!w.valid) return j;
  j["tensor"] = w.is_lse ? "lse" : w.tensor.empty() ? "o" : w.tensor;  // a backward gradient: dq, dk, dv
  j["b"] = w.b;
  j["h"] = w.h;
  j["i"] = w.i;
  j["x"] = w.x;
  j["kernel"] = number(w.kernel);
  j["kernel_hex"] = hex(w.kernel);
  j["oracle"] = number(w.oracle);
  j["oracle_hex"] = hex(w.oracle);
  j["error"] = number(w.error);
  j["bound"] = number(w.bound);
  j["ulps"] = number(w.ulps);
  j["over_bound"] = number(w.over_bound);
  j["line"] = w.format();
  return j;
}

Json failure_json(const ReportFailure& f) {
  Json j = {{"kernel", f.kernel},
          {"verdict", verdict_name(f.verdict)},
          {"signature", f.signature},
          {"raw_signature", f.raw_signature},
          {"status", f.status},
          {"generator", f.generator},
          {"seed", f.seed},
          {"case_index", f.case_index},
          {"occurrences", f.occurrences},
          {"detail", f.detail},
          {"worst", worst_json(f.worst)},
          {"case_file", f.case_file},
          {"repro", f.repro},
          {"case_text", f.case_text},
          {"minimize",
           {{"from_elements", f.minimize.from_elements},
            {"to_elements", f.minimize.to_elements},
            {"runs", f.minimize.runs},
            {"seconds", f.minimize.seconds},
            {"exhausted", f.minimize.exhausted}}}};
  // Optional keys, only for a backward kernel's failure: readers of
  // forward-only reports see no change.
  if (!f.pass.empty()) j["pass"] = f.pass;
  if (!f.gradient.empty()) j["gradient"] = f.gradient;
  if (!f.alone.outcome.empty())
    j["alone"] = {{"outcome", f.alone.outcome}, {"line", f.alone.line}, {"seconds", f.alone.seconds}};
  return j;
}

// A maximum that may be infinite (an error against a zero bound) or NaN.
Json extended(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
}

Json axis_json(const LogAxis& a) { return {{"lo_exp", a.lo_exp}, {"hi_exp", a.hi_exp}}; }

template <size_t N>
Json sparse_counts(const std::array<int64_t, N>& counts) {
  Json j = Json::array();
  for (size_t i = 0; i < N; ++i)
    if (counts[i]) j.push_back({i, counts[i]});
  return j;
}

// [[row, column, n]] for a row-major table of `columns` columns.
Json sparse_table(const std::vector<int64_t>& table, int columns) {
  Json j = Json::array();
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i]) j.push_back({i / size_t(columns), i % size_t(columns), table[i]});
  return j;
}

template <size_t N>
Json sparse_max(const std::array<double, N>& maxima) {
  Json j = Json::array();
  for (size_t i = 0; i < N; ++i)
    if (maxima[i] != 0) j.push_back({i, extended(maxima[i])});
  return j;
}

Json error_stats_json(const std::vector<ReportErrorStats>& all) {
  Json series = Json::array();
  for (const ReportErrorStats& e : all) {
    const ErrorSeries& s = e.stats;
    series.push_back({{"kernel", e.kernel},
                      {"series", e.series},
                      {"elements", s.elements},
                      {"rows", s.rows},
                      {"max_over_bound", extended(s.max_over_bound)},
                      {"max_ulps", extended(s.max_ulps)},
                      {"over_bound", sparse_counts(s.over_bound)},
                      {"ulps", sparse_counts(s.ulps)},
                      {"by_key_position", sparse_table(s.by_key_position, kErrorBins)},
                      {"key_position_max", sparse_max(s.key_position_max)},
                      {"by_score", sparse_table(s.by_score, kErrorBins)},
                      {"score_max", sparse_max(s.score_max)}});
  }
  return {{"axes",
           {{"error", axis_json(kErrorAxis)},
            {"score", axis_json(kScoreAxis)},
            {"key_position_bins", kKeyPositionBins}}},
          {"series", std::move(series)}};
}

Json audits_json(const std::vector<ReportAudit>& audits) {
  Json j = Json::array();
  for (const ReportAudit& a : audits) {
    Json cells = Json::array();
    for (const ReportAuditCell& c : a.cells)
      cells.push_back({{"row", c.row},
                       {"column", c.column},
                       {"status", c.status},
                       {"verdict", verdict_name(c.verdict)},
                       {"cases", c.cases},
                       {"signature", c.signature}});
    j.push_back({{"kernel", a.kernel}, {"rows", a.rows}, {"columns", a.columns}, {"cells", std::move(cells)},
                 {"notes", a.notes}, {"unsupported_reasons", a.unsupported_reasons}});
  }
  return j;
}

Json mutants_json(const std::vector<ReportMutant>& mutants) {
  Json j = Json::array();
  for (const ReportMutant& m : mutants)
    j.push_back({{"kernel", m.kernel},
                 {"killed", m.killed},
                 {"cases", m.cases},
                 {"cases_to_kill", m.cases_to_kill},
                 {"seconds_to_kill", m.seconds_to_kill},
                 {"verdict", verdict_name(m.verdict)},
                 {"signature", m.signature}});
  return j;
}

Json findings_json(const std::vector<ReportFinding>& findings, const std::vector<ReportFailure>& failures) {
  Json j = Json::array();
  for (const ReportFinding& g : findings) {
    Json verdicts = Json::array(), signatures = Json::array();
    for (VerdictClass v : g.verdicts) verdicts.push_back(verdict_name(v));
    for (size_t i : g.failures) signatures.push_back(failures[i].signature);
    j.push_back({{"id", g.id},
                 {"kernel", g.kernel},
                 {"needs", g.needs},
                 {"features", g.features},
                 {"status", g.status},
                 {"verdicts", std::move(verdicts)},
                 {"occurrences", g.occurrences},
                 {"first_case", g.first_case},
                 {"signatures", std::move(signatures)},
                 {"representative", failures[g.representative].signature}});
  }
  return j;
}

// nlohmann's indented dump puts every array element on a line of its own:
// the error histograms' [bin, count] pairs would take five lines each, most
// of a report.  Arrays that hold only numbers, literals and blanks are
// written on one line instead ("[12, 40, 3]"); the text parses to the same
// JSON.
std::string compact_leaf_arrays(const std::string& pretty) {
  std::string out;
  out.reserve(pretty.size());
  bool in_string = false;
  for (size_t i = 0; i < pretty.size(); ++i) {
    const char ch = pretty[i];
    if (in_string) {
      out += ch;
      if (ch == '\\') out += pretty[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch != '[') {
      out += ch;
      continue;
    }
    const size_t close = pretty.find_first_of("[]{}\"", i + 1);
    if (close == std::string::npos || pretty[close] != ']') {
      out += ch;
      continue;
    }
    // A leaf: its elements, each trimmed, joined by ", ".
    std::string items;
    size_t start = i + 1;
    while (start < close) {
      const size_t comma = std::min(pretty.find(',', start), close);
      const size_t a = pretty.find_first_not_of(" \n", start);
      size_t b = pretty.find_last_not_of(" \n", comma - 1);
      if (a < comma && b != std::string::npos && b >= a) items += (items.empty() ? "" : ", ") + pretty.substr(a, b - a + 1);
      start = comma + 1;
    }
    out += "[" + items + "]";
    i = close;
  }
  return out;
}

Json verdict_counts(const ReportCell& c) {
  Json j = Json::object();
  for (int v = 0; v < kVerdictClassCount; ++v)
    if (c.by_verdict[size_t(v)]) j[std::string(verdict_name(VerdictClass(v)))] = c.by_verdict[size_t(v)];
  return j;
}

}  // namespace

std::string report_to_json(const Report& r) {
  Json j;
  j["schema"] = kReportSchemaName;
  j["schema_version"] = kReportSchemaVersion;
  const ReportRun& run = r.run;
  j["run"] = {{"kind", run.kind},
              {"command", run.command},
              {"attnfuzz_version", run.attnfuzz_version},
              {"started_utc", run.started_utc},
              {"seed", run.seed},
              {"first_case", run.first_case},
              {"cases", run.cases},
              {"case_limit", run.case_limit},
              {"time_limit_s", run.time_limit_s},
              {"stop_reason", run.stop_reason},
              {"jobs", run.jobs},
              {"oracle", run.oracle},
              {"classes", run.classes},
              {"corpus", run.corpus},
              {"wall_s", run.wall_s},
              {"determinism", {{"share", run.rerun_share}, {"reruns", run.reruns}}}};
  j["kernels"] = Json::array();
  for (const ReportKernel& k : r.kernels)
    j["kernels"].push_back({{"name", k.name},
                            {"origin", k.origin},
                            {"description", k.description},
                            {"conventions", {{"masked_row_output", k.masked_row_output}, {"empty_lse", k.empty_lse}}},
                            {"kernel_s", k.kernel_s}});
  for (size_t i = 0; i < r.kernels.size(); ++i)
    if (!r.kernels[i].pass.empty()) j["kernels"][i]["pass"] = r.kernels[i].pass;
  for (size_t i = 0; i < r.kernels.size(); ++i)
    if (const auto& s = r.kernels[i].split)
      j["kernels"][i]["split"] = {{"calls", s->calls}, {"compile_calls", s->compile_calls}, {"compile_s", s->compile_s},
                                  {"run_s", s->run_s}, {"copy_s", s->copy_s}};
  j["generators"] = Json::array();
  for (const ReportGenerator& g : r.generators)
    j["generators"].push_back({{"name", g.name}, {"weight", g.weight}, {"cases", g.cases}});
  j["counts"] = Json::array();
  for (const ReportCell& c : r.cells)
    j["counts"].push_back({{"kernel", c.kernel},
                           {"generator", c.generator},
                           {"cases", c.cases},
                           {"pass", c.count(VerdictClass::Pass)},
                           {"unsupported", c.count(VerdictClass::Unsupported)},
                           {"failed", c.failed()},
                           {"by_verdict", verdict_counts(c)}});
  j["failures"] = Json::array();
  for (const ReportFailure& f : r.failures) j["failures"].push_back(failure_json(f));
  const std::vector<ReportFinding> findings = group_findings(r.failures);
  j["findings"] = findings_json(findings, r.failures);
  const ReportTiming& t = r.timing;
  j["timing"] = {{"generate_s", t.generate_s}, {"oracle_s", t.oracle_s},     {"kernel_s", t.kernel_s},
                 {"judge_s", t.judge_s},       {"minimize_s", t.minimize_s}, {"wall_s", t.wall_s},
                 {"cases_per_second", t.cases_per_second}};
  j["cases"] = Json::array();
  for (const ReportCase& c : r.cases) {
    Json v = Json::array();
    for (VerdictClass cls : c.verdicts) v.push_back(verdict_name(cls));
    j["cases"].push_back({{"i", c.index}, {"g", c.generator}, {"v", std::move(v)}});
  }
  j["errors"] = r.errors;
  j["summary"] = {{"verdict", r.passed() ? "pass" : "fail"},
                  {"new_failures", r.new_failures()},
                  {"known_failures", r.known_failures()},
                  {"failing_cases", r.failing_cases()},
                  {"findings", findings.size()}};
  j["raw_failures"] = Json::array();
  for (const ReportFailure& f : r.raw_failures) j["raw_failures"].push_back(failure_json(f));
  j["raw_failures_complete"] = r.raw_failures_complete;
  j["error_stats"] = error_stats_json(r.error_stats);
  j["audits"] = audits_json(r.audits);
  j["mutants"] = mutants_json(r.mutants);
  return compact_leaf_arrays(j.dump(2)) + "\n";
}

namespace {

// Reading: every access checks the type, so malformed JSON becomes one
// error line naming the key, never an exception escaping to the caller.
struct Reader {
  std::string error;

  template <typename T>
  bool get(const Json& j, const char* key, T& out) {
    if (!error.empty()) return false;
    auto it = j.find(key);
    if (it == j.end()) return true;  // optional: keep the default
    try {
      out = it->template get<T>();
      return true;
    } catch (const std::exception&) {
      error = std::string("key '") + key + "' has the wrong type";
      return false;
    }
  }
  double get_number(const Json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nan("");
    double x = 0;
    get(j, key, x);
    return x;
  }
  VerdictClass verdict(const std::string& name) {
    if (auto v = parse_verdict_name(name)) return *v;
    if (error.empty()) error = "unknown verdict '" + name + "'";
    return VerdictClass::Pass;
  }
  const Json& array(const Json& j, const char* key) {
    static const Json empty = Json::array();
    auto it = j.find(key);
    if (it == j.end()) return empty;
    if (!it->is_array()) {
      if (error.empty()) error = std::string("key '") + key + "' is not an array";
      return empty;
    }
    return *it;
  }
  double exact(const Json& j, const char* hex_key, const char* key) {
    std::string s;
    get(j, hex_key, s);
    if (auto x = parse_hex(s)) return *x;
    return get_number(j, key);
  }

  ReportFailure failure(const Json& f) {
    ReportFailure o;
    std::string verdict_text;
    get(f, "kernel", o.kernel);
    get(f, "verdict", verdict_text);
    o.verdict = verdict(verdict_text);
    get(f, "pass", o.pass);
    get(f, "gradient", o.gradient);
    get(f, "signature", o.signature);
    get(f, "raw_signature", o.raw_signature);
    get(f, "status", o.status);
    get(f, "generator", o.generator);
    get(f, "seed", o.seed);
    get(f, "case_index", o.case_index);
    get(f, "occurrences", o.occurrences);
    get(f, "detail", o.detail);
    if (auto w = f.find("worst"); w != f.end() && w->is_object()) {
      get(*w, "valid", o.worst.valid);
      if (o.worst.valid) {
        std::string tensor;
        get(*w, "tensor", tensor);
        o.worst.is_lse = tensor == "lse";
        if (tensor != "lse" && tensor != "o") o.worst.tensor = tensor;
        get(*w, "b", o.worst.b);
        get(*w, "h", o.worst.h);
        get(*w, "i", o.worst.i);
        get(*w, "x", o.worst.x);
        o.worst.kernel = exact(*w, "kernel_hex", "kernel");
        o.worst.oracle = exact(*w, "oracle_hex", "oracle");
        o.worst.error = get_number(*w, "error");
        o.worst.bound = get_number(*w, "bound");
        o.worst.ulps = get_number(*w, "ulps");
        o.worst.over_bound = get_number(*w, "over_bound");
      }
    }
    get(f, "case_file", o.case_file);
    get(f, "repro", o.repro);
    get(f, "case_text", o.case_text);
    if (auto m = f.find("minimize"); m != f.end() && m->is_object()) {
      get(*m, "from_elements", o.minimize.from_elements);
      get(*m, "to_elements", o.minimize.to_elements);
      get(*m, "runs", o.minimize.runs);
      get(*m, "seconds", o.minimize.seconds);
      get(*m, "exhausted", o.minimize.exhausted);
    }
    if (auto a = f.find("alone"); a != f.end() && a->is_object()) {
      get(*a, "outcome", o.alone.outcome);
      get(*a, "line", o.alone.line);
      get(*a, "seconds", o.alone.seconds);
    }
    return o;
  }

  // A maximum written by extended(): a number, "inf", "-inf" or "nan".
  double extended(const Json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
      const std::string s = j.get<std::string>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    if (error.empty()) error = "a maximum in error_stats is neither a number nor inf/nan";
    return 0;
  }

  // Sparse [[i, value]] or [[i, k, value]] entries with every index checked.
  bool entry(const Json& e, size_t arity, std::initializer_list<int> limits) {
    if (!e.is_array() || e.size() != arity) {
      if (error.empty()) error = "error_stats: malformed sparse entry " + e.dump();
      return false;
    }
    size_t n = 0;
    for (int limit : limits) {
      if (!e[n].is_number_unsigned() || e[n].get<uint64_t>() >= uint64_t(limit)) {
        if (error.empty()) error = "error_stats: bin out of range in " + e.dump();
        return false;
      }
      ++n;
    }
    return true;
  }
  bool count_entry(const Json& e, size_t arity, std::initializer_list<int> limits) {
    if (!entry(e, arity, limits)) return false;
    if (e[arity - 1].is_number_integer()) return true;
    if (error.empty()) error = "error_stats: a count is not an integer in " + e.dump();
    return false;
  }

  template <size_t N>
  void counts(const Json& s, const char* key, std::array<int64_t, N>& out) {
    for (const Json& e : array(s, key))
      if (count_entry(e, 2, {int(N)})) out[e[0].get<size_t>()] = e[1].get<int64_t>();
  }
  template <size_t N>
  void maxima(const Json& s, const char* key, std::array<double, N>& out) {
    for (const Json& e : array(s, key))
      if (entry(e, 2, {int(N)})) out[e[0].get<size_t>()] = extended(e[1]);
  }
  void table(const Json& s, const char* key, int rows, std::vector<int64_t>& out) {
    for (const Json& e : array(s, key)) {
      if (!count_entry(e, 3, {rows, kErrorBins})) continue;
      if (out.empty()) out.assign(size_t(rows) * kErrorBins, 0);
      out[e[0].get<size_t>() * kErrorBins + e[1].get<size_t>()] = e[2].get<int64_t>();
    }
  }

  void error_stats(const Json& j, std::vector<ReportErrorStats>& out) {
    auto it = j.find("error_stats");
    if (it == j.end() || !it->is_object()) return;
    // Bins are only meaningful on the axes they were counted on.
    // (Compared key by key: ordered_json equality would also compare the key order.)
    auto integer = [](const Json& o, const char* key) -> std::optional<int64_t> {
      if (!o.is_object()) return std::nullopt;
      auto at = o.find(key);
      if (at == o.end() || !at->is_number_integer()) return std::nullopt;
      return at->get<int64_t>();
    };
    auto same_axis = [&](const Json& axes, const char* key, const LogAxis& axis) {
      auto a = axes.find(key);
      return a != axes.end() && integer(*a, "lo_exp") == axis.lo_exp && integer(*a, "hi_exp") == axis.hi_exp;
    };
    const auto axes = it->find("axes");
    if (axes == it->end() || !axes->is_object() || !same_axis(*axes, "error", kErrorAxis) ||
        !same_axis(*axes, "score", kScoreAxis) || integer(*axes, "key_position_bins") != kKeyPositionBins) {
      if (error.empty()) error = "error_stats: histogram axes differ from this attnfuzz's";
      return;
    }
    for (const Json& s : array(*it, "series")) {
      ReportErrorStats e;
      get(s, "kernel", e.kernel);
      get(s, "series", e.series);
      ErrorSeries& st = e.stats;
      get(s, "elements", st.elements);
      get(s, "rows", st.rows);
      if (auto m = s.find("max_over_bound"); m != s.end()) st.max_over_bound = extended(*m);
      if (auto m = s.find("max_ulps"); m != s.end()) st.max_ulps = extended(*m);
      counts(s, "over_bound", st.over_bound);
      counts(s, "ulps", st.ulps);
      table(s, "by_key_position", kKeyPositionBins, st.by_key_position);
      maxima(s, "key_position_max", st.key_position_max);
      table(s, "by_score", kScoreBins, st.by_score);
      maxima(s, "score_max", st.score_max);
      // The two tables are allocated together (error_stats.h).
      if (st.by_key_position.empty() != st.by_score.empty()) {
        if (st.by_key_position.empty()) st.by_key_position.assign(size_t(kKeyPositionBins) * kErrorBins, 0);
        if (st.by_score.empty()) st.by_score.assign(size_t(kScoreBins) * kErrorBins, 0);
      }
      out.push_back(std::move(e));
    }
  }

  void audits(const Json& j, std::vector<ReportAudit>& out) {
    for (const Json& a : array(j, "audits")) {
      ReportAudit o;
      get(a, "kernel", o.kernel);
      get(a, "rows", o.rows);
      get(a, "columns", o.columns);
      get(a, "notes", o.notes);
      get(a, "unsupported_reasons", o.unsupported_reasons);
      for (const Json& c : array(a, "cells")) {
        ReportAuditCell cell;
        std::string v;
        get(c, "row", cell.row);
        get(c, "column", cell.column);
        get(c, "status", cell.status);
        get(c, "verdict", v);
        if (!v.empty()) cell.verdict = verdict(v);
        get(c, "cases", cell.cases);
        get(c, "signature", cell.signature);
        o.cells.push_back(std::move(cell));
      }
      out.push_back(std::move(o));
    }
  }

  void mutants(const Json& j, std::vector<ReportMutant>& out) {
    for (const Json& m : array(j, "mutants")) {
      ReportMutant o;
      std::string v;
      get(m, "kernel", o.kernel);
      get(m, "killed", o.killed);
      get(m, "cases", o.cases);
      get(m, "cases_to_kill", o.cases_to_kill);
      get(m, "seconds_to_kill", o.seconds_to_kill);
      get(m, "verdict", v);
      if (!v.empty()) o.verdict = verdict(v);
      get(m, "signature", o.signature);
      out.push_back(std::move(o));
    }
  }
};

}  // namespace

std::optional<Report> report_from_json(std::string_view text, std::string* error) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "report.json: not a JSON object";
    return std::nullopt;
  }
  Reader rd;
  std::string schema;
  int version = 0;
  rd.get(j, "schema", schema);
  rd.get(j, "schema_version", version);
  if (schema != kReportSchemaName) {
    *error = "report.json: schema is '" + schema + "', expected " + kReportSchemaName;
    return std::nullopt;
  }
  if (version < 1 || version > kReportSchemaVersion) {
    *error = fmt::format("report.json: schema_version {} is not supported (this attnfuzz reads 1..{})", version,
                         kReportSchemaVersion);
    return std::nullopt;
  }
  Report r;
  if (auto it = j.find("run"); it != j.end() && it->is_object()) {
    const Json& run = *it;
    ReportRun& o = r.run;
    rd.get(run, "kind", o.kind);
    rd.get(run, "command", o.command);
    rd.get(run, "attnfuzz_version", o.attnfuzz_version);
    rd.get(run, "started_utc", o.started_utc);
    rd.get(run, "seed", o.seed);
    rd.get(run, "first_case", o.first_case);
    rd.get(run, "cases", o.cases);
    rd.get(run, "case_limit", o.case_limit);
    rd.get(run, "time_limit_s", o.time_limit_s);
    rd.get(run, "stop_reason", o.stop_reason);
    rd.get(run, "jobs", o.jobs);
    rd.get(run, "oracle", o.oracle);
    rd.get(run, "classes", o.classes);
    rd.get(run, "corpus", o.corpus);
    rd.get(run, "wall_s", o.wall_s);
    if (auto d = run.find("determinism"); d != run.end() && d->is_object()) {
      rd.get(*d, "share", o.rerun_share);
      rd.get(*d, "reruns", o.reruns);
    }
  }
  for (const Json& k : rd.array(j, "kernels")) {
    ReportKernel o;
    rd.get(k, "name", o.name);
    rd.get(k, "origin", o.origin);
    rd.get(k, "description", o.description);
    if (auto c = k.find("conventions"); c != k.end() && c->is_object()) {
      rd.get(*c, "masked_row_output", o.masked_row_output);
      rd.get(*c, "empty_lse", o.empty_lse);
    }
    rd.get(k, "kernel_s", o.kernel_s);
    rd.get(k, "pass", o.pass);
    if (auto s = k.find("split"); s != k.end() && s->is_object()) {
      ReportKernelSplit split;
      rd.get(*s, "calls", split.calls);
      rd.get(*s, "compile_calls", split.compile_calls);
      rd.get(*s, "compile_s", split.compile_s);
      rd.get(*s, "run_s", split.run_s);
      rd.get(*s, "copy_s", split.copy_s);
      o.split = split;
    }
    r.kernels.push_back(o);
  }
  for (const Json& g : rd.array(j, "generators")) {
    ReportGenerator o;
    rd.get(g, "name", o.name);
    rd.get(g, "weight", o.weight);
    rd.get(g, "cases", o.cases);
    r.generators.push_back(o);
  }
  for (const Json& c : rd.array(j, "counts")) {
    ReportCell o;
    rd.get(c, "kernel", o.kernel);
    rd.get(c, "generator", o.generator);
    rd.get(c, "cases", o.cases);
    if (auto v = c.find("by_verdict"); v != c.end() && v->is_object())
      for (auto it = v->begin(); it != v->end(); ++it) {
        const VerdictClass cls = rd.verdict(it.key());
        int64_t n = 0;
        rd.get(*v, it.key().c_str(), n);
        o.by_verdict[size_t(cls)] = n;
      }
    r.cells.push_back(o);
  }
  for (const Json& f : rd.array(j, "failures")) r.failures.push_back(rd.failure(f));
  for (const Json& f : rd.array(j, "raw_failures")) r.raw_failures.push_back(rd.failure(f));
  rd.get(j, "raw_failures_complete", r.raw_failures_complete);
  rd.error_stats(j, r.error_stats);
  rd.audits(j, r.audits);
  rd.mutants(j, r.mutants);
  if (auto t = j.find("timing"); t != j.end() && t->is_object()) {
    ReportTiming& o = r.timing;
    rd.get(*t, "generate_s", o.generate_s);
    rd.get(*t, "oracle_s", o.oracle_s);
    rd.get(*t, "kernel_s", o.kernel_s);
    rd.get(*t, "judge_s", o.judge_s);
    rd.get(*t, "minimize_s", o.minimize_s);
    rd.get(*t, "wall_s", o.wall_s);
    rd.get(*t, "cases_per_second", o.cases_per_second);
  }
  for (const Json& c : rd.array(j, "cases")) {
    ReportCase o;
    rd.get(c, "i", o.index);
    rd.get(c, "g", o.generator);
    std::vector<std::string> names;
    rd.get(c, "v", names);
    for (const std::string& n : names) o.verdicts.push_back(rd.verdict(n));
    r.cases.push_back(std::move(o));
  }
  rd.get(j, "errors", r.errors);
  if (auto s = j.find("summary"); s != j.end() && s->is_object() && s->contains("failing_cases")) {
    int64_t failing = 0;
    rd.get(*s, "failing_cases", failing);
    r.failing_case_count = failing;
  }
  if (!rd.error.empty()) {
    *error = "report.json: " + rd.error;
    return std::nullopt;
  }
  return r;
}

bool write_report_json(const Report& r, const std::string& dir, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = dir + ": cannot create the report folder (" + ec.message() + ")";
    return false;
  }
  return write_file_atomically((fs::path(dir) / "report.json").string(), report_to_json(r), error);
}

}  // namespace afz
