#include "harness/report/findings.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string_view>

#include "harness/report/report_views.h"

namespace afz {
namespace {

// Features that only say which precision the case ran in: every case has
// an input dtype, and a defect that shows in one usually shows in all.
constexpr std::string_view kPrecisionFeatures[] = {"dtype=", "out="};

// Feature families: the situation a feature creates for the kernel.  Each
// entry is a feature prefix (case_features.cpp's names) and its family; the
// first match wins; a feature no prefix matches is a family of its own.
struct Family {
  std::string_view prefix, family;
};
constexpr Family kFeatureFamilies[] = {
    // Rows or blocks that see no key: what masking, windows and empty
    // sequences have in common.
    {"causal_", "mask"},
    {"window_", "mask"},
    {"bool_mask:", "mask"},
    {"add_mask:-inf", "mask"},
    {"add_mask:lowest", "mask"},
    {"empty_seq", "mask"},
    // Finite additive masks shift scores without removing keys.
    {"add_mask:", "additive mask"},
    // Where the row maximum sits and how it moves between key blocks.
    {"t:late_max", "moving max"},
    {"t:early_max", "moving max"},
    {"t:growing_max", "moving max"},
    // Score magnitudes far from 1.
    {"t:shift_scores", "magnitude"},
    {"t:row_contrast", "magnitude"},
    {"t:scale_q", "magnitude"},
    // Long rows of (near-)equal scores.
    {"t:flat", "flat rows"},
    {"t:ties", "flat rows"},
    // Memory: strides, views and broadcasts.
    {"layout:", "layout"},
    {"row_gap", "layout"},
    {"kv_broadcast:", "layout"},
    // Several query heads per key/value head.
    {"gqa", "heads"},
    {"mqa", "heads"},
    // Values past each sequence that a correct kernel never reads.
    {"poison:", "poison"},
    // No family joins the gradients of a backward failure ("grad:dq",
    // signature.h): each is its own, so a defect of dQ and one of dV (in
    // FlashAttention separate loops, even kernels) are separate findings.
};

bool precision_only(std::string_view feature) {
  for (std::string_view p : kPrecisionFeatures)
    if (feature.starts_with(p)) return true;
  return false;
}

bool contains(const std::vector<std::string>& big, const std::vector<std::string>& small) {
  return std::includes(big.begin(), big.end(), small.begin(), small.end());
}

template <typename T>
bool contains(const std::vector<T>& big, const std::vector<T>& small) {
  for (const T& x : small)
    if (std::find(big.begin(), big.end(), x) == big.end()) return false;
  return true;
}

std::vector<std::string> families_of(const std::vector<std::string>& features) {
  std::vector<std::string> out;
  for (const std::string& f : features) out.push_back(feature_family(f));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Signatures of one kernel with the same ingredients, before joining.
struct Group {
  std::string kernel;
  std::vector<std::string> needs;
  std::vector<VerdictClass> verdicts;
  std::vector<size_t> failures;
};

}  // namespace

std::vector<std::string> signature_features(const std::string& signature) {
  // "kernel|verdict|features|shape": read from the right, since a kernel
  // name may itself hold a '|'.
  const size_t shape_bar = signature.rfind('|');
  if (shape_bar == std::string::npos || shape_bar == 0) return {};
  const size_t feature_bar = signature.rfind('|', shape_bar - 1);
  if (feature_bar == std::string::npos) return {};
  std::vector<std::string> out;
  const std::string features = signature.substr(feature_bar + 1, shape_bar - feature_bar - 1);
  size_t start = 0;
  while (start < features.size()) {
    const size_t comma = std::min(features.find(',', start), features.size());
    std::string f = features.substr(start, comma - start);
    if (!f.empty() && !precision_only(f)) out.push_back(std::move(f));
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string feature_family(const std::string& feature) {
  for (const Family& f : kFeatureFamilies)
    if (std::string_view(feature).starts_with(f.prefix)) return std::string(f.family);
  return feature;
}

std::string ingredients_text(const ReportFinding& f) {
  if (f.needs.empty()) return "plain case";
  std::string s;
  for (const std::string& family : f.needs) {
    std::string members;
    for (const std::string& feature : f.features)
      if (feature_family(feature) == family && feature != family) members += (members.empty() ? "" : ", ") + feature;
    s += (s.empty() ? "" : " + ") + family + (members.empty() ? "" : " (" + members + ")");
  }
  return s;
}

std::string verdicts_text(const ReportFinding& f) {
  std::string s;
  for (VerdictClass v : f.verdicts) s += (s.empty() ? "" : "+") + std::string(verdict_name(v));
  return s;
}

std::string finding_line(const ReportFinding& f) {
  return f.kernel + " " + verdicts_text(f) + " needs " + ingredients_text(f) + ": " + std::to_string(f.occurrences) +
         " failing runs, " + std::to_string(f.failures.size()) + (f.failures.size() == 1 ? " variant" : " variants") +
         ", first case " + std::to_string(f.first_case);
}

std::vector<ReportFinding> group_findings(const std::vector<ReportFailure>& failures) {
  // Same kernel and ingredients: one group, in order of first appearance.
  std::vector<Group> groups;
  std::map<std::pair<std::string, std::vector<std::string>>, size_t> at;
  for (size_t i = 0; i < failures.size(); ++i) {
    const ReportFailure& f = failures[i];
    auto key = std::pair(f.kernel, families_of(signature_features(f.signature)));
    auto it = at.find(key);
    if (it == at.end()) {
      it = at.emplace(key, groups.size()).first;
      groups.push_back({f.kernel, key.second, {}, {}});
    }
    Group& g = groups[it->second];
    g.failures.push_back(i);
    if (std::find(g.verdicts.begin(), g.verdicts.end(), f.verdict) == g.verdicts.end()) g.verdicts.push_back(f.verdict);
  }

  // A group joins the group with the most ingredients among those of its
  // kernel whose ingredients are a proper subset of its own (ties: the
  // first); the plain case's group (no ingredients: every group contains
  // it) only when it also shows every verdict of the joining one.  Taken
  // fewest ingredients first, so the group it joins has already joined its
  // own.
  std::vector<size_t> order(groups.size()), root(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::iota(root.begin(), root.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return groups[a].needs.size() < groups[b].needs.size(); });
  for (size_t g : order) {
    size_t best = g;
    for (size_t r = 0; r < groups.size(); ++r) {
      const Group &a = groups[g], &b = groups[r];
      if (r == g || a.kernel != b.kernel || a.needs.size() <= b.needs.size() || !contains(a.needs, b.needs) ||
          (b.needs.empty() && !contains(b.verdicts, a.verdicts)))
        continue;
      if (best == g || b.needs.size() > groups[best].needs.size() || (b.needs.size() == groups[best].needs.size() && r < best))
        best = r;
    }
    root[g] = best == g ? g : root[best];
  }

  // One finding per root, in order of its first failure.
  std::map<size_t, size_t> finding_of_root;
  std::vector<ReportFinding> out;
  std::vector<CaseSize> best_size;
  for (size_t i = 0; i < failures.size(); ++i) {
    const ReportFailure& f = failures[i];
    const size_t r = root[at.at({f.kernel, families_of(signature_features(f.signature))})];
    auto [it, inserted] = finding_of_root.emplace(r, out.size());
    if (inserted) {
      out.push_back({});
      out.back().kernel = f.kernel;
      out.back().needs = groups[r].needs;
      best_size.push_back({});
    }
    ReportFinding& g = out[it->second];
    const CaseSize size = repro_size(f);
    if (g.failures.empty() || size < best_size[it->second]) {
      g.representative = i;
      best_size[it->second] = size;
    }
    g.failures.push_back(i);
    g.occurrences += f.occurrences;
    if (f.case_index >= 0 && (g.first_case < 0 || f.case_index < g.first_case)) g.first_case = f.case_index;
    if (std::find(g.verdicts.begin(), g.verdicts.end(), f.verdict) == g.verdicts.end()) g.verdicts.push_back(f.verdict);
    for (std::string& feature : signature_features(f.signature))
      if (std::find(g.features.begin(), g.features.end(), feature) == g.features.end())
        g.features.push_back(std::move(feature));
  }
  // Status: new if any variant is new, else smaller if any is, else known.
  const std::map<std::string, int> rank = {{"known", 0}, {"smaller", 1}, {"new", 2}};
  for (size_t n = 0; n < out.size(); ++n) {
    ReportFinding& g = out[n];
    g.id = "F" + std::to_string(n + 1);
    std::sort(g.features.begin(), g.features.end());
    std::sort(g.verdicts.begin(), g.verdicts.end(), [](VerdictClass a, VerdictClass b) { return int(a) < int(b); });
    g.status = "known";
    for (size_t i : g.failures) {
      auto it = rank.find(failures[i].status);
      if (it != rank.end() && it->second > rank.at(g.status)) g.status = failures[i].status;
    }
  }
  return out;
}

std::string alone_summary(const ReportAlone& a) {
  if (a.outcome.empty()) return "";
  // What each outcome means for the person reading the failure.
  const std::string meaning = a.outcome == "fails"               ? "the repro fails by itself"
                              : a.outcome == "fails_differently" ? "the repro fails by itself, but otherwise"
                              : a.outcome == "passes"
                                  ? "it fails only after other cases ran in the same process"
                              : a.outcome == "unsupported" ? "the kernel declines the case by itself"
                                                           : "the repro gave no verdict";
  return a.outcome + " alone (" + a.line + "): " + meaning;
}

}  // namespace afz
