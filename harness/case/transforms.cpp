#include "harness/case/transforms.h"

#include <algorithm>

#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// An integer parameter clamped to [lo, hi] before conversion: a hostile
// case file may hold 1e300, and int(1e300) is undefined behaviour.
int int_param(const Transform& t, const char* key, double fallback, int lo, int hi) {
  return int(std::clamp(t.get(key, fallback), double(lo), double(hi)));
}

// Sets the carrier: q[.,0] = 1 and k_j[0] = target_j / scale for each key.
template <typename TargetFn>
void plant_scores(const Case& c, LogicalTensors& x, TargetFn target) {
  const double scale = c.effective_scale();
  for (int b = 0; b < x.batch; ++b) {
    for (int h = 0; h < x.heads_q; ++h)
      for (int i = 0; i < x.sq; ++i) x.Q(b, h, i, 0) = 1.0;
    const int n = c.seqlens_k[b];
    for (int h = 0; h < x.heads_kv; ++h)
      for (int j = 0; j < x.sk; ++j) x.K(b, h, j, 0) = target(j, n) / scale;
  }
}

void late_max(const Case& c, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const int count = int_param(t, "count", 5, 0, kMaxSeqlen);
  const double boost = t.get("boost", 20);
  plant_scores(c, x, [&](int j, int n) { return j >= n - count ? boost : 0.0; });
}

void early_max(const Case& c, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const int count = int_param(t, "count", 1, 0, kMaxSeqlen);
  const double boost = t.get("boost", 20);
  plant_scores(c, x, [&](int j, int) { return j < count ? boost : 0.0; });
}

// The max grows every block: each block rescales the accumulator.
void growing_max(const Case& c, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const int block = int_param(t, "block", 64, 1, kMaxSeqlen);
  const double step = t.get("step", 2);
  plant_scores(c, x, [&](int j, int) { return step * double(j / block); });
}

// Every score shifted by `offset` (e.g. -1e4: the whole row underflows fp32 exp).
void shift_scores(const Case& c, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const double offset = t.get("offset", -100);
  plant_scores(c, x, [&](int, int) { return offset; });
}

// Multiplies q by `factor`: |s| grows linearly (magnitude class).
void scale_q(const Case&, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const double f = t.get("factor", 100);
  for (double& v : x.q) v *= f;
}

void scale_v(const Case&, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const double f = t.get("factor", 100);
  for (double& v : x.v) v *= f;
}

// Neighbouring query rows at +amp and -amp: one tile holds rows of very
// different scale, which breaks a single scalar max for the tile.
void row_contrast(const Case& c, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const double amp = t.get("amp", 100);
  const double scale = c.effective_scale();
  for (int b = 0; b < x.batch; ++b) {
    for (int h = 0; h < x.heads_q; ++h)
      for (int i = 0; i < x.sq; ++i) x.Q(b, h, i, 0) = (i % 2 == 0) ? 1.0 : -1.0;
    for (int h = 0; h < x.heads_kv; ++h)
      for (int j = 0; j < x.sk; ++j) x.K(b, h, j, 0) = amp / scale;
  }
}

// Near-equal scores over the whole row: l grows to about seqlen_k.
void flat(const Case&, const Transform& t, const CounterRng&, LogicalTensors& x) {
  const double eps = t.get("eps", 1.0 / 1024);
  for (double& v : x.q) v *= eps;
}

// Every key identical to key 0 of its head: exact ties in the max.
void ties(const Case&, const Transform&, const CounterRng&, LogicalTensors& x) {
  for (int b = 0; b < x.batch; ++b)
    for (int h = 0; h < x.heads_kv; ++h)
      for (int j = 1; j < x.sk; ++j)
        for (int d = 0; d < x.d; ++d) x.K(b, h, j, d) = x.K(b, h, 0, d);
}

std::vector<double>* tensor_of(const Transform& t, LogicalTensors& x) {
  switch (int_param(t, "tensor", 2, 0, 2)) {
    case 0: return &x.q;
    case 1: return &x.k;
    default: return &x.v;
  }
}

// A fraction (per mille) of one tensor's elements set to `value`-class
// numbers: 0 = zeros, 1 = subnormals of the input dtype, 2 = its largest
// finite magnitude.  tensor: 0 q, 1 k, 2 v.
void special_values(const Case& c, const Transform& t, const CounterRng& rng, LogicalTensors& x) {
  const uint64_t permil = uint64_t(std::clamp(t.get("permil", 100.0), 0.0, 1000.0));
  const int kind = int_param(t, "kind", 0, 0, 2);
  std::vector<double>& v = *tensor_of(t, x);
  for (size_t n = 0; n < v.size(); ++n) {
    // Independent counters for the choice, the sign and the magnitude.
    if (rng.below(3 * n, 1000) >= permil) continue;
    const double sign = (rng.bits(3 * n + 1) >> 63) ? -1.0 : 1.0;
    switch (kind) {
      case 1: v[n] = sign * min_subnormal(c.in_dtype) * double(1 + rng.below(3 * n + 2, 7)); break;
      case 2: v[n] = sign * max_finite(c.in_dtype); break;
      default: v[n] = 0.0;
    }
  }
}

}  // namespace

const std::vector<TransformDef>& transform_table() {
  static const std::vector<TransformDef> table = {
      {"late_max", "largest scores in the last `count` keys of each sequence",
       {{"count", 5, "keys"}, {"boost", 20, "score added"}}, late_max},
      {"early_max", "largest scores in the first keys, smaller ever after (alpha = 1 path)",
       {{"count", 1, "keys"}, {"boost", 20, "score added"}}, early_max},
      {"growing_max", "the row max grows every key block, so every block rescales",
       {{"block", 64, "keys per step"}, {"step", 2, "score increase per block"}}, growing_max},
      {"shift_scores", "every score shifted by offset (e.g. -1e4: fp32 exp underflows)",
       {{"offset", -100, "score offset"}}, shift_scores},
      {"scale_q", "q multiplied by factor: score magnitude", {{"factor", 100, "multiplier"}}, scale_q},
      {"scale_v", "v multiplied by factor", {{"factor", 100, "multiplier"}}, scale_v},
      {"row_contrast", "alternate query rows at +amp and -amp", {{"amp", 100, "score magnitude"}}, row_contrast},
      {"flat", "near-equal scores over long rows", {{"eps", 1.0 / 1024, "q multiplier"}}, flat},
      {"ties", "every key equal to key 0: tied maxima", {}, ties},
      {"special_values", "zeros (kind 0), subnormals (1) or largest finite values (2) in a tensor",
       {{"tensor", 2, "0 q, 1 k, 2 v"}, {"kind", 0, "0 zero, 1 subnormal, 2 max finite"},
        {"permil", 100, "fraction per mille"}},
       special_values},
  };
  return table;
}

const TransformDef* find_transform(std::string_view name) {
  for (const TransformDef& d : transform_table())
    if (name == d.name) return &d;
  return nullptr;
}

std::string check_transform(const Transform& t) {
  const TransformDef* def = find_transform(t.name);
  if (!def) return "unknown transform '" + t.name + "'";
  for (const auto& [key, value] : t.params) {
    bool known = false;
    for (const TransformParam& p : def->params) known |= key == p.key;
    if (!known) return "transform '" + t.name + "' has no parameter '" + key + "'";
  }
  return {};
}

}  // namespace afz
