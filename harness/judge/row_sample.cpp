#include "harness/judge/row_sample.h"

#include <fmt/format.h>

#include "harness/case/rng.h"

namespace afz {

namespace {

constexpr uint64_t kSampleStream = 0x726f7773;  // "rows": a stream of its own, apart from the generators'

bool is_edge(int i, int seqlen, int tile) {
  if (i == 0 || i == seqlen - 1) return true;
  return tile > 0 && (i % tile == 0 || i % tile == tile - 1);
}

}  // namespace

int64_t sequence_edge_rows(int seqlen, int tile) {
  int64_t edges = 0;
  for (int i = 0; i < seqlen; ++i) edges += is_edge(i, seqlen, tile) ? 1 : 0;
  return edges;
}

std::string RowCoverage::describe() const {
  if (!sampled) return fmt::format("rows checked: all {}", rows);
  const double percent = rows > 0 ? 100.0 * double(checked) / double(rows) : 100.0;
  return fmt::format("rows checked: {} of {} ({:.3f}%): {} at sequence or tile edges, {} sampled (seed {})", checked,
                     rows, percent, edge_rows, checked - edge_rows, seed);
}

std::vector<int64_t> checked_rows(const afz_problem& p, const RowSampling& s, RowCoverage* coverage) {
  RowCoverage cov;
  cov.seed = s.seed;
  for (int b = 0; b < p.batch; ++b) cov.rows += int64_t(p.heads_q) * p.seqlens_q[b];
  auto row_index = [&](int b, int h, int i) { return (int64_t(b) * p.heads_q + h) * p.max_seqlen_q + i; };
  std::vector<int64_t> out;
  if (!s.active() || s.max_rows >= cov.rows) {
    out.reserve(size_t(cov.rows));
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.seqlens_q[b]; ++i) out.push_back(row_index(b, h, i));
    cov.checked = cov.rows;
    if (coverage) *coverage = cov;
    return out;
  }
  int64_t edges = 0;
  for (int b = 0; b < p.batch; ++b) edges += p.heads_q * sequence_edge_rows(p.seqlens_q[b], s.tile_rows);
  // Algorithm S: candidate t of `others` is taken with probability
  // (wanted - taken) / (others - t), in integers: exactly `wanted` in all.
  const int64_t others = cov.rows - edges;
  const int64_t wanted = s.max_rows > edges ? s.max_rows - edges : 0;
  const CounterRng rng(s.seed, kSampleStream);
  int64_t t = 0, taken = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.seqlens_q[b]; ++i) {
        if (is_edge(i, p.seqlens_q[b], s.tile_rows)) {
          out.push_back(row_index(b, h, i));
          continue;
        }
        if (taken < wanted && int64_t(rng.below(uint64_t(t), uint64_t(others - t))) < wanted - taken) {
          out.push_back(row_index(b, h, i));
          ++taken;
        }
        ++t;
      }
  cov.sampled = true;
  cov.edge_rows = edges;
  cov.checked = edges + taken;
  if (coverage) *coverage = cov;
  return out;
}

}  // namespace afz
