// Row sampling for cases too large to check every row of (issue 15): every
// query row at a sequence edge or at a kernel tile's edge, where index
// arithmetic goes wrong first, plus a seeded sample of the other rows, with
// the exact coverage stated.  Off by default: every row is checked wherever
// that is affordable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

struct RowSampling {
  int64_t max_rows = 0;  // rows to check at most, edges first; 0: every row
  int tile_rows = 64;    // a kernel's query tile: rows i with i % tile_rows in {0, tile_rows - 1} are edges
  uint64_t seed = 0;     // for the sample of the remaining rows
  bool active() const { return max_rows > 0; }
};

struct RowCoverage {
  bool sampled = false;   // false: every query row was checked
  int64_t rows = 0;       // query rows of the case (i < seqlens_q[b], over every b and h)
  int64_t checked = 0;    // rows judged
  int64_t edge_rows = 0;  // of them, at a sequence or tile edge
  uint64_t seed = 0;
  // One line: "rows checked: 1280 of 65536 (1.953%): 1024 at sequence or tile edges, 256 sampled (seed 7)".
  std::string describe() const;
};

// The result rows (r = (b * heads_q + h) * max_seqlen_q + i, ascending) a
// verdict checks: every query row when sampling is off or max_rows covers
// them all; else every edge row (even past max_rows: edges are never
// dropped) and max_rows - edges others, chosen by selection sampling
// (Knuth's Algorithm S) from CounterRng(seed): exactly that many, the same
// ones for the same seed and shape.
std::vector<int64_t> checked_rows(const afz_problem& p, const RowSampling& s, RowCoverage* coverage);

// The rows of one sequence of `seqlen` queries (one head) that are edges
// for tile size `tile`: what checked_rows keeps whatever max_rows says, and
// what a budget needs to know of a sampled case before it is built.
int64_t sequence_edge_rows(int seqlen, int tile);

}  // namespace afz
