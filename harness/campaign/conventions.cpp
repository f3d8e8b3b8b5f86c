#include "harness/campaign/conventions.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/judge/verdict.h"
#include "harness/run/gpu/gpu_run.h"

namespace afz {
namespace {

// Where two values count as the same in the table: the probes' O and LSE are
// O(1), and every kernel under test is far better than this, so "≈exact"
// means the convention agrees, not that the kernel is accurate (the verdict
// judges that).
constexpr double kSameValue = 1e-2;

}  // namespace

const std::vector<ConventionProbe>& convention_probes() {
  // bf16, d = 64, one head: the smallest problems that pose each question.
  static const std::vector<ConventionProbe> probes = {
      {"causal_br_empty_rows", "causal bottom-right, seqlen_q 8 > seqlen_k 4: rows 0-3 see no key",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 4\ncausal bottom_right\nseed 1\n", 0, 0},
      {"window_empty_row", "window (2, 0) top-left, seqlen_q 8 > seqlen_k 4: row 7 sees no key",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 4\nwindow 2 0 top_left\nseed 2\n", 0, 7},
      {"bool_mask_empty_row", "boolean mask masking all of row 0",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 16\nbool_mask rows_every 4\nseed 3\n", 0, 0},
      {"add_mask_neg_inf_row", "additive mask of -inf over all of row 0",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 16\nadd_mask -inf rows_every 4\nseed 4\n", 0, 0},
      {"add_mask_lowest_row", "additive mask of the dtype's lowest (finfo.min) over row 0: finite, so not masked",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 16\nadd_mask lowest rows_every 4\nseed 5\n", 0, 0},
      {"add_mask_minus_1e4_row", "additive mask of -1e4 over row 0: a shift, so softmax is unchanged",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 16\nadd_mask -1e4 rows_every 4\nseed 6\n", 0, 0},
      {"add_mask_minus_1e9_row", "additive mask of -1e9 over row 0: a shift, but past fp32's resolution of the scores",
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 16\nadd_mask -1e9 rows_every 4\nseed 7\n", 0, 0},
      {"empty_key_sequence", "varlen batch with seqlen_k = 0 in sequence 1",
       "attnfuzz-case 1\nbatch 2\nseqlen_q 4\nseqlen_k 6 0\nseed 8\n", 1, 0},
      {"causal_top_left", "causal top-left, seqlen_q 4 < seqlen_k 9: row 0 sees key 0 only",
       "attnfuzz-case 1\nseqlen_q 4\nseqlen_k 9\ncausal top_left\nseed 9\n", 0, 0},
      {"causal_bottom_right", "causal bottom-right, seqlen_q 4 < seqlen_k 9: row 0 sees keys 0-5",
       "attnfuzz-case 1\nseqlen_q 4\nseqlen_k 9\ncausal bottom_right\nseed 9\n", 0, 0},
  };
  return probes;
}

namespace {

bool near(double a, double b) { return std::fabs(a - b) <= kSameValue * std::max(1.0, std::fabs(b)); }

// The probed row of O, classified by what a reader wants to know.
std::string classify_o(const std::vector<double>& o, const std::vector<double>& exact,
                       const std::vector<double>& mean_v) {
  bool zero = true, nan = false, inf = false, is_exact = true, is_mean = !mean_v.empty();
  for (size_t x = 0; x < o.size(); ++x) {
    zero = zero && o[x] == 0;
    nan = nan || std::isnan(o[x]);
    inf = inf || std::isinf(o[x]);
    is_exact = is_exact && near(o[x], exact[x]);
    is_mean = is_mean && near(o[x], mean_v[x]);
  }
  if (nan) return "NaN";
  if (inf) return "inf";
  if (zero) return "0";
  if (is_exact) return "≈exact";
  if (is_mean) return "mean of V";
  return fmt::format("other (o[0] = {:.4g}, exact {:.4g})", o[0], exact[0]);
}

std::string classify_lse(double lse, double exact) {
  if (std::isnan(lse)) return "NaN";
  if (std::isinf(lse)) return lse > 0 ? "+inf" : "-inf";
  if (std::isfinite(exact) && near(lse, exact)) return "≈exact";
  return fmt::format("{:.6g}", lse);
}

std::string describe_exact_o(const std::vector<double>& exact) {
  for (double v : exact)
    if (v != 0) return "≈exact";
  return "0";
}

}  // namespace

ConventionTable probe_conventions(const std::vector<CampaignKernel>& kernels, const Runner& runner) {
  ConventionTable t;
  for (const CampaignKernel& k : kernels) t.kernels.push_back(k.kernel->name);
  for (const ConventionProbe& probe : convention_probes()) {
    if (!(t.gpu_lost = gpu::gpu_lost_reason()).empty()) break;  // the rest would be `unsupported`
    ParseError error;
    const std::optional<Case> c = parse_case(probe.case_text, &error);
    if (!c) throw std::logic_error(std::string("convention probe ") + probe.name + ": " + error.message);
    Materialized m(*c);
    OracleResult r = runner.reference(m);
    const int64_t row = r.row_index(probe.b, 0, probe.i);
    std::vector<double> exact_o(size_t(r.dv)), mean_v(size_t(r.dv), 0.0);
    for (int x = 0; x < r.dv; ++x) exact_o[size_t(x)] = r.o[size_t(row * r.dv + x)].hi;
    // The plain average of V over the row's keys (all of them when none is
    // visible): what a kernel gives when it turns a masked row's scores into
    // equal finite values.
    const int sk = c->seqlens_k[size_t(probe.b)];
    int counted = 0;
    for (bool visible_only : {true, false}) {
      for (int j = 0; j < sk; ++j) {
        if (visible_only && !m.visible(probe.b, 0, probe.i, j)) continue;
        ++counted;
        for (int x = 0; x < r.dv; ++x) mean_v[size_t(x)] += m.logical().V(probe.b, 0, j, x);
      }
      if (counted) break;
    }
    if (counted)
      for (double& v : mean_v) v /= counted;
    else
      mean_v.clear();
    const double exact_lse = r.lse[size_t(row)].hi;
    t.probes.push_back(&probe);
    t.exact.push_back({describe_exact_o(exact_o), classify_lse(exact_lse, exact_lse), "exact function"});
    std::vector<ConventionCell>& row_cells = t.cells.emplace_back();
    bool lost = false;
    for (const CampaignKernel& k : kernels) {
      const CaseOutcome out = runner.run(*k.kernel, m, &r);
      lost = lost || lost_to_gpu(out);
      ConventionCell cell;
      cell.verdict = verdict_name(out.verdict.cls);
      if (out.verdict.cls == VerdictClass::Unsupported || out.verdict.cls == VerdictClass::Crash ||
          out.verdict.cls == VerdictClass::Hang) {
        // One table cell: a '|' in a library's message would split it.
        std::string why = out.verdict.detail;
        for (char& ch : why)
          if (ch == '|' || ch == '\n') ch = '/';
        cell.verdict += ": " + why;
        row_cells.push_back(cell);
        continue;
      }
      std::vector<double> o(size_t(r.dv));
      for (int x = 0; x < r.dv; ++x) o[size_t(x)] = m.o_at(probe.b, 0, probe.i, x);
      cell.o = classify_o(o, exact_o, mean_v);
      cell.lse = (k.kernel->caps.flags & AFZ_CAP_LSE) ? classify_lse(m.lse_at(probe.b, 0, probe.i), exact_lse)
                                                      : "(no LSE)";
      row_cells.push_back(cell);
    }
    if (!lost) t.probes_before_loss = t.probes.size();
  }
  t.gpu_lost = gpu::gpu_lost_reason();
  if (t.gpu_lost.empty()) t.probes_before_loss = t.probes.size();
  return t;
}

bool ConventionTable::any_ran() const {
  for (const std::vector<ConventionCell>& row : cells)
    for (const ConventionCell& c : row)
      if (!c.o.empty()) return true;
  return false;
}

std::vector<std::string> ConventionTable::disagreements() const {
  std::vector<std::string> out;
  for (size_t p = 0; p < probes.size(); ++p) {
    std::map<std::string, std::vector<std::string>> by_behaviour;
    for (size_t k = 0; k < kernels.size(); ++k) {
      const ConventionCell& c = cells[p][k];
      if (c.o.empty()) continue;  // did not run
      by_behaviour[fmt::format("O {}, LSE {}", c.o, c.lse)].push_back(kernels[k]);
    }
    const std::string exact_text = fmt::format("O {}, LSE {}", exact[p].o, exact[p].lse);
    bool off_exact = false;
    for (const auto& [behaviour, who] : by_behaviour) {
      // A kernel without an LSE output agrees on the LSE by default.
      const bool same_o = behaviour.rfind("O " + exact[p].o + ",", 0) == 0;
      const bool no_lse = behaviour.find("(no LSE)") != std::string::npos;
      off_exact = off_exact || !(same_o && (no_lse || behaviour == exact_text));
    }
    if (by_behaviour.size() < 2 && !off_exact) continue;
    std::string line = fmt::format("{}: exact {}", probes[p]->name, exact_text);
    for (const auto& [behaviour, who] : by_behaviour) {
      std::string names;
      for (const std::string& n : who) names += (names.empty() ? "" : ", ") + n;
      line += fmt::format("; {} ({})", behaviour, names);
    }
    out.push_back(line);
  }
  return out;
}

std::string ConventionTable::markdown() const {
  std::string s = "| probe | exact O / LSE |";
  for (const std::string& k : kernels) s += " " + k + " |";
  s += "\n| --- | --- |";
  for (size_t k = 0; k < kernels.size(); ++k) s += " --- |";
  s += "\n";
  for (size_t p = 0; p < probes.size(); ++p) {
    s += fmt::format("| `{}`: {} | {} / {} |", probes[p]->name, probes[p]->question, exact[p].o, exact[p].lse);
    for (const ConventionCell& c : cells[p]) {
      if (c.o.empty()) s += " " + c.verdict + " |";
      else s += fmt::format(" {} / {} ({}) |", c.o, c.lse, c.verdict);
    }
    s += "\n";
  }
  return s;
}

}  // namespace afz
