#include "harness/case/distribution_fill.h"

#include <algorithm>

#include "harness/case/case_io.h"
#include "harness/case/parallel_chunks.h"

namespace afz {
namespace {

// The counter of a row's keep-or-zero draw (few_rows): a sub-stream keyed by
// the tensor's own stream, so it never shares a counter with the values'.
constexpr uint64_t kRowSelectStream = 1;

ValueDraw::Kind kind_of(const std::string& name) {
  if (name == "uniform") return ValueDraw::Kind::Uniform;
  if (name == "int") return ValueDraw::Kind::Int;
  if (name == "few_rows") return ValueDraw::Kind::FewRows;
  return ValueDraw::Kind::Normal;  // "normal" and anything validate_case let through before it
}

// One loop per kind: the switch in ValueDraw is decided outside the loop.
template <ValueDraw::Kind K>
void draw_range(double* out, const ValueDraw& draw, const CounterRng& rng, int64_t begin, int64_t end) {
  ValueDraw fixed = draw;
  fixed.kind = K;
  for (int64_t n = begin; n < end; ++n) out[n] = fixed(rng, uint64_t(n));
}

}  // namespace

ValueDraw::ValueDraw(const Distribution& dist) : kind(kind_of(dist.kind)), param(dist.param) {
  if (kind == Kind::Int) int_radius = int64_t(dist.param < 0 ? 0 : dist.param);
}

void fill_distribution(std::vector<double>& out, const Distribution& dist, uint64_t seed, uint64_t stream, int row) {
  const ValueDraw draw(dist);
  const CounterRng rng(seed, stream);
  double* data = out.data();
  for_each_chunk(int64_t(out.size()), 1, [&](int64_t begin, int64_t end) {
    switch (draw.kind) {
      case ValueDraw::Kind::Uniform: draw_range<ValueDraw::Kind::Uniform>(data, draw, rng, begin, end); break;
      case ValueDraw::Kind::Int: draw_range<ValueDraw::Kind::Int>(data, draw, rng, begin, end); break;
      case ValueDraw::Kind::FewRows: draw_range<ValueDraw::Kind::FewRows>(data, draw, rng, begin, end); break;
      default: draw_range<ValueDraw::Kind::Normal>(data, draw, rng, begin, end);
    }
  });
  if (draw.kind != ValueDraw::Kind::FewRows || row <= 0) return;
  const CounterRng rows(rng.key, kRowSelectStream);
  for (size_t r = 0; r * size_t(row) < out.size(); ++r)
    if (rows.below(r, uint64_t(kPermilScale)) >= uint64_t(dist.param))
      std::fill_n(out.begin() + std::ptrdiff_t(r * size_t(row)), row, 0.0);
}

}  // namespace afz
