// The fast backward tier: the engine in double with compensated sums, and
// an a-priori bound on its own error per gradient element.
//
// Derivation (u = 2^-53, first order, then doubled for the second-order
// products of first-order terms, which stay below rho^2 < rho / 4):
//   * score s_j: q_x k_x is exact in double (24 x 24 bits); the compensated
//     sum costs 2u |t| + O(u^2); scale, softcap (libm tanh: 2 ulps) and the
//     mask add a few u each: |ds_j| <= c sigma_j with c = 8u (+ O(d u^2)).
//   * weight w_j = exp(s_j - m) / l: exp's 2 ulps (4u), the subtraction
//     u |s_j - m| <= u (sigma_j + sigma_max), l's compensated sum and the
//     division: |dw / w| <= rho = (c + u) 2 sigma_max + 10u, for every key.
//   * O: compensated sum of w v, error <= (rho + 3u) W per element, so
//     D = dO . O is off by (rho + 5u) B_W, B_W = sum |dO| W; dP (exact
//     products, compensated) by 3u A.  g (softcap): |dg| <= scale (2 c
//     sigma / |cap| + 8u).
//   * dS = w (dP - D): rho |dS| + w (3u A + (rho + 5u) B_W) + 2u |dS|; the
//     gradient's compensated sum adds 3u |value| and each product u.
// Hence err <= 2 [(rho + 8u)(rel + cancel_w) + (2c / |cap|) score] + 3u |value|
// + underflow: each of the n products may lose 2^-1074, times the tiny term.
// A row whose rho exceeds 1/8 is left to the escalation tier (err = +inf).
#include <cmath>
#include <limits>

#include "oracles/backward_engine.h"

namespace afz {
namespace {

constexpr double kU = 0x1p-53;
constexpr double kTiny = 0x1p-1074;
constexpr double kScoreRel = 8 * kU;             // c above
constexpr double kMaxRho = 0.125;                // beyond: not resolvable by this tier
constexpr double kSecondOrder = 2;               // covers products of first-order terms (rho < 1/8)
constexpr double kInf = std::numeric_limits<double>::infinity();

struct DoublePolicy {
  static double from(double x) { return x; }
  static double to_double(double x) { return x; }
  static DD to_dd(double x) { return DD{x, 0.0}; }
};

void bound(GradTerms& t, double rho, double score_coef) {
  for (size_t e = 0; e < t.value.size(); ++e) {
    if (!(rho < kMaxRho)) {
      t.err[e] = kInf;
      continue;
    }
    t.err[e] = kSecondOrder * ((rho + 8 * kU) * (t.rel[e] + t.cancel_w[e]) + score_coef * t.score[e]) +
               3 * kU * std::fabs(t.value[e].hi) + kTiny * (t.tiny[e] + 1);
  }
}

class FastBackward final : public BackwardOracle {
 public:
  std::string name() const override { return "fast"; }
  GradResult compute(const afz_problem& p, const afz_tensor& dout) const override {
    GradResult r = oracle_detail::BackwardEngine<double, DoublePolicy>(p, dout).run();
    const double rho = (kScoreRel + kU) * 2 * r.max_sigma + 10 * kU;
    const double cap = std::fabs(double(p.softcap));
    const double score_coef = cap > 0 ? 2 * kScoreRel / cap : 0.0;
    bound(r.dq, rho, score_coef);
    bound(r.dk, rho, score_coef);
    bound(r.dv, rho, 0.0);
    return r;
  }
};

}  // namespace

std::unique_ptr<BackwardOracle> make_fast_backward_oracle() { return std::make_unique<FastBackward>(); }

std::unique_ptr<BackwardOracle> make_escalation_backward_oracle() {
  if (auto m = make_mpfr_backward_oracle()) return m;
  return make_boost_backward_oracle();
}

}  // namespace afz
