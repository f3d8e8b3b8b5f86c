// The cells earlier audits already ran (`audit --skip-covered DIR...`).  A
// sweep cut by a deadline or a lost GPU resumes by sweeping the same shard
// again with the earlier report folders named: every cell that each audited
// kernel already has in one of them is skipped, whatever range, shard or
// machine ran it, so holes left by cut sweeps fill without hand-kept ranges.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace afz {

struct CoveredCells {
  // kernel (as its matrix names it, "NAME [bwd]" for a backward slot) -> (row, column)
  std::map<std::string, std::set<std::pair<std::string, std::string>>> by_kernel;
  // True when every one of `kernels` has the cell.
  bool covers(const std::vector<std::string>& kernels, const std::string& row, const std::string& column) const;
};

// The matrix cells of DIR/report.json, for each folder.  nullopt with a
// one-line *error for a folder without a readable report, a report that is
// no audit, or one of another seed (its cells hold other cases).
std::optional<CoveredCells> read_covered_cells(const std::vector<std::string>& dirs, uint64_t seed,
                                               std::string* error);

}  // namespace afz
