// A tensor's base values: value n of a Distribution on one RNG stream.
//
// The distribution's kind is a string in the case; it is resolved once per
// tensor (ValueDraw), never per element.  Elements are counter-based, so a
// huge tensor is filled in chunks over threads with the same bits.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/rng.h"

namespace afz {

// A Distribution with its kind resolved to an enum.
struct ValueDraw {
  enum class Kind { Normal, Uniform, Int, FewRows };
  Kind kind = Kind::Normal;
  double param = 1;
  int64_t int_radius = 0;  // Int: values in [-int_radius, int_radius]

  explicit ValueDraw(const Distribution& dist);
  double operator()(const CounterRng& rng, uint64_t n) const {
    switch (kind) {
      case Kind::Uniform: return rng.symmetric(n) * param;
      case Kind::Int:  // small integers: exact products and sums
        return double(int64_t(rng.below(n, uint64_t(2 * int_radius + 1))) - int_radius);
      case Kind::FewRows: return rng.normal(n);  // the row's own draw decides whether it is kept (fill)
      default: return rng.normal(n) * param;
    }
  }
};

// out[n] = value n of `dist` on RNG stream `stream` of `seed` (the same
// draw the Q, K and V recipes use; the backward pass's dO has its own
// stream).  `row`: elements per row (the last dimension), which few_rows
// keeps or zeroes whole.
void fill_distribution(std::vector<double>& out, const Distribution& dist, uint64_t seed, uint64_t stream, int row);

}  // namespace afz
