// The multiprecision backward tiers: the engine on Boost's cpp_bin_float
// and on MPFR (through Boost's mpfr_float backend), 256 bits.
//
// Error: every quantity is computed with relative error ~2^-240 of the
// magnitudes summed (256-bit arithmetic, functions within 2^11 ulps for
// Boost, correctly rounded for MPFR), amplified by scores up to the row's
// sigma (exp turns an absolute score error into a relative weight error):
// far below the 2^-105 of the double-double result, which dominates.
//   err = 2^-104 |value| + 2^-200 (rel + score + cancel_w) + 2^-1074
// 2^-200 leaves 40 bits for sigma (scores up to 2^40) and the functions.
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>

#include "oracles/backward_engine.h"
#if ATTNFUZZ_HAVE_MPFR
#include <boost/multiprecision/mpfr.hpp>
#endif

namespace afz {
namespace {

namespace bmp = boost::multiprecision;
constexpr int kBits = 256;
constexpr double kDdRel = 0x1p-104;
constexpr double kMpRel = 0x1p-200;
constexpr double kTiny = 0x1p-1074;

template <class Num>
struct MpPolicy {
  static Num from(double x) { return Num(x); }
  static double to_double(const Num& x) { return x.template convert_to<double>(); }
  static DD to_dd(const Num& x) {
    const double hi = x.template convert_to<double>();
    if (!std::isfinite(hi)) return DD{hi, 0.0};
    return DD{hi, Num(x - Num(hi)).template convert_to<double>()};
  }
};

void bound(GradTerms& t) {
  for (size_t e = 0; e < t.value.size(); ++e)
    t.err[e] = kDdRel * std::fabs(t.value[e].hi) + kMpRel * (t.rel[e] + t.score[e] + t.cancel_w[e]) + kTiny;
}

template <class Num>
class MpBackward final : public BackwardOracle {
 public:
  explicit MpBackward(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  GradResult compute(const afz_problem& p, const afz_tensor& dout) const override {
    GradResult r = oracle_detail::BackwardEngine<Num, MpPolicy<Num>>(p, dout).run();
    bound(r.dq);
    bound(r.dk);
    bound(r.dv);
    return r;
  }

 private:
  std::string name_;
};

using BoostReal = bmp::number<bmp::cpp_bin_float<kBits, bmp::digit_base_2>, bmp::et_off>;

}  // namespace

std::unique_ptr<BackwardOracle> make_boost_backward_oracle() {
  return std::make_unique<MpBackward<BoostReal>>("boost");
}

#if ATTNFUZZ_HAVE_MPFR
namespace {
// 256 bits = 78 decimal digits (mpfr_float_backend takes digits10).
using MpfrReal = bmp::number<bmp::mpfr_float_backend<78>, bmp::et_off>;
}  // namespace
std::unique_ptr<BackwardOracle> make_mpfr_backward_oracle() { return std::make_unique<MpBackward<MpfrReal>>("mpfr"); }
#else
std::unique_ptr<BackwardOracle> make_mpfr_backward_oracle() { return nullptr; }
#endif

}  // namespace afz
