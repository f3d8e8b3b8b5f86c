#include "harness/campaign/audit_coverage.h"

#include <fmt/format.h>

#include "harness/report/report.h"
#include "harness/report/report_views.h"

namespace afz {

bool CoveredCells::covers(const std::vector<std::string>& kernels, const std::string& row,
                          const std::string& column) const {
  for (const std::string& k : kernels) {
    const auto it = by_kernel.find(k);
    if (it == by_kernel.end() || !it->second.count({row, column})) return false;
  }
  return !kernels.empty();
}

std::optional<CoveredCells> read_covered_cells(const std::vector<std::string>& dirs, uint64_t seed,
                                               std::string* error) {
  CoveredCells out;
  for (const std::string& dir : dirs) {
    std::string why;
    const std::optional<Report> r = read_report_folder(dir, &why);
    if (!r) {
      *error = fmt::format("--skip-covered {}: {}", dir, why);
      return std::nullopt;
    }
    if (r->run.kind != "audit") {
      *error = fmt::format("--skip-covered {}: a report of a {}, not of an audit", dir, r->run.kind);
      return std::nullopt;
    }
    if (r->run.seed != seed) {
      *error = fmt::format("--skip-covered {}: an audit with seed {}, this one has seed {}: its cells hold other cases",
                           dir, r->run.seed, seed);
      return std::nullopt;
    }
    for (const ReportAudit& a : r->audits)
      for (const ReportAuditCell& c : a.cells) out.by_kernel[a.kernel].insert({c.row, c.column});
  }
  return out;
}

}  // namespace afz
