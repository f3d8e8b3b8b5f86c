#include "harness/judge/backward_verdict.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "kernels/abi/dtype.h"

namespace afz {
namespace {

constexpr double kMaxRelErr = 0.5;          // e_max beyond this: outside the precision model
constexpr double kUnderflowOpsPerTerm = 4;  // product, sum, conversion, final scale
// A composite forward's sqrt(scale) on q and on k: four roundings (sqrt's
// twice, both products) where the fused model charges one (backward_verdict.h).
constexpr double kSplitScaleExtraRoundings = 3;

double gamma(double n, double u) { return n * u / (1 - n * u); }

}  // namespace

GradBoundModel::GradBoundModel(const afz_precision& prec, afz_dtype in_dtype, afz_dtype o_dtype, const afz_problem& p)
    : softcap(std::fabs(double(p.softcap))), d(p.head_dim), dim_v(p.head_dim_v) {
  u_s = unit_roundoff(prec.score_dtype);
  const afz_dtype p_dtype = prec.p_dtype == AFZ_P_DTYPE_OF_V ? in_dtype : prec.p_dtype;
  u_p = p_dtype == prec.score_dtype ? 0.0 : unit_roundoff(p_dtype);
  u_o = unit_roundoff(o_dtype);
  // The harness stores O with round_to (RNE, gradual underflow): an O in
  // the subnormal range is off by at most half the smallest subnormal.
  eta_o = min_subnormal(o_dtype) / 2;
  u_acc = unit_roundoff(prec.acc_dtype);
  const double gamma_d = gamma(dim_v + 1, u_acc);
  d_rel = u_o + (1 + u_o) * gamma_d;
  d_abs = (1 + gamma_d) * eta_o;
  exact_products = in_dtype != AFZ_F32 || prec.score_dtype != AFZ_F32;
  c_s = gamma(d + (exact_products ? 0 : 1), u_s) + 2 * u_s + (softcap > 0 ? 4 * u_s : 0.0);
  exp_rel = 2 * double(prec.exp_ulps) * u_s;
  auto lost = [&](afz_dtype t) { return prec.flush_subnormals ? min_normal(t) : min_subnormal(t) / 2; };
  eta_s = lost(prec.score_dtype);
  eta_p = lost(p_dtype);
  eta_acc = lost(prec.acc_dtype);
}

double GradBoundModel::slack(const GradResult& r) const {
  const double scores = r.max_sigma + r.max_abs_lse;
  // An own forward's P also carries its row's mean error and its row sum's.
  const double own = c_own > 0 ? c_own * r.max_sigma + u_s * r.max_abs_lse + exp_rel + gamma_row : 0.0;
  const double e_max = std::expm1((c_s + split_scale) * r.max_sigma + 3 * u_s * scores + own) + exp_rel + u_p;
  return e_max < kMaxRelErr ? 1 / (1 - e_max) : 0.0;
}

void GradBoundModel::own_forward(uint32_t caps, const GradResult& r) {
  if (!(caps & AFZ_CAP_BWD_OWN_FORWARD)) return;
  // 16-bit inputs' products, exact unscaled, are fp32 products once scaled.
  split_scale = (kSplitScaleExtraRoundings + (exact_products ? 1 : 0)) * u_s;
  c_own = c_s + split_scale + u_s;  // + the subtraction s - m
  int longest_row = 0;
  for (int32_t n : r.visible_keys) longest_row = std::max(longest_row, int(n));
  gamma_row = gamma(longest_row, u_acc);
  // D^'s error per unit of Abar: exp's error through sum |dS| <= 2 Abar, the
  // row sum's through |D| <= Abar and D's own sum, dP's dot product, P^'s division.
  c_rowsum = 2 * exp_rel + 2 * gamma_row + gamma(dim_v + 1, u_acc) + u_s;
}

double GradBoundModel::own_dq_dk(const GradTerms& t, size_t e) const {
  if (c_own == 0) return 0;
  return c_own * (t.own_mean[e] + t.own_scores[e]) + u_s * (t.lse[e] + t.own_scores_lse[e]) +
         (exp_rel + gamma_row + split_scale) * t.rel[e] + c_rowsum * t.own_rowsum[e] + split_scale * t.score[e];
}

double GradBoundModel::own_dv(const GradTerms& t, size_t e) const {
  if (c_own == 0) return 0;
  return c_own * t.own_mean[e] + u_s * t.lse[e] + (exp_rel + gamma_row) * t.rel[e] + split_scale * t.score[e];
}

double GradBoundModel::dq_dk(const GradTerms& t, size_t e, int terms, double slack) const {
  const double rel = exp_rel + 3 * u_s + u_p + gamma(terms, u_acc);
  const double score = c_s * (1 + (softcap > 0 ? 2 / softcap : 0.0)) + u_s;
  const double err = slack * (rel * t.rel[e] + score * t.score[e] + 2 * u_s * t.lse[e] + d_rel * t.cancel[e] +
                              d_abs * t.dout_l1[e] + own_dq_dk(t, e)) +
                     (eta_s + eta_p) * t.tiny[e] + kUnderflowOpsPerTerm * (terms + 1) * eta_acc;
  return err + ulp(grad_dtype, std::fabs(t.value[e].hi) + err);
}

void GradBoundModel::store_gradients(uint32_t caps, afz_dtype in_dtype, const afz_problem& p) {
  if (!(caps & AFZ_CAP_GRADS_IN_INPUT_DTYPE)) return;
  grad_dtype = in_dtype;
  // Under GQA a KV head's dK, dV may be the sum of its query heads'
  // gradients each already rounded to the input dtype (FlashAttention-2's
  // dk_expanded, cuDNN's per-head dK): u |g_h| + eta per head, and
  // sum_h |g_h| <= rel (the sum of |c_t| |z_t| over every term).
  const int group = p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1;
  if (group > 1) {
    u_group = unit_roundoff(in_dtype);
    eta_group = group * min_subnormal(in_dtype) / 2;
  }
}

double GradBoundModel::group_rounding(const GradTerms& t, size_t e) const {
  return u_group * t.rel[e] + eta_group;
}

double GradBoundModel::dv(const GradTerms& t, size_t e, int terms, double slack) const {
  const double rel = exp_rel + u_p + u_s + gamma(terms, u_acc);
  const double err = slack * (rel * t.rel[e] + (c_s + u_s) * t.score[e] + 2 * u_s * t.lse[e] + own_dv(t, e)) +
                     (eta_s + eta_p) * t.tiny[e] + kUnderflowOpsPerTerm * (terms + 1) * eta_acc;
  return err + ulp(grad_dtype, std::fabs(t.value[e].hi) + err);
}

namespace {

using Grad = BackwardMaterialized::Grad;

struct Judge {
  const BackwardMaterialized& m;
  const GradResult& r;
  const GradBoundModel& model;
  double slack;
  Verdict v;

  void raise(VerdictClass c, const std::string& why) {
    if (int(c) > int(v.cls)) {
      v.cls = c;
      v.detail = why;
    }
  }

  // Every element of one gradient; `terms` the number of products summed.
  template <class Bound>
  void tensor(Grad g, const char* name, const GradTerms& t, int heads, int dim, const int32_t* lens,
              bool by_key, Bound bound) {
    const afz_problem& p = *m.problem().fwd;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int s = 0; s < lens[b]; ++s) {
          const int64_t idx = by_key ? r.key(b, h, s) : r.row(b, h, s);
          const int terms = by_key ? r.key_rows[idx] : r.visible_keys[idx];
          for (int x = 0; x < dim; ++x) {
            const size_t e = size_t(idx) * dim + x;
            const float kv = m.grad_at(g, b, h, s, x);
            const double ov = t.value[e].hi + t.value[e].lo;
            ++v.elements;
            const std::string at = fmt::format("{}[b={} h={} s={} x={}]", name, b, h, s, x);
            if (bits_of(kv) == kPoisonF32) {
              ++v.failing;
              raise(VerdictClass::Unwritten, at + " never written");
              continue;
            }
            const double bnd = bound(t, e, terms);
            // A gradient stored in a narrow dtype (fp16: 65504) that the exact
            // value, within its bound, may exceed: inf of its sign is the
            // correctly rounded result, not a defect.
            if (std::isinf(kv) && std::signbit(kv) == std::signbit(ov) &&
                std::isinf(round_to(model.grad_dtype, std::fabs(ov) + bnd)))
              continue;
            if (!std::isfinite(kv)) {
              ++v.failing;
              raise(VerdictClass::NanInf, fmt::format("{} = {} where the oracle gives {:a}", at, kv, ov));
              continue;
            }
            const double err = std::fabs(double(kv) - ov);
            const double over = bnd > 0 ? err / bnd : (err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
            v.max_abs_error = std::max(v.max_abs_error, err);
            v.grad_stats[size_t(g)].add_element(over, err / ulp(AFZ_F32, ov));
            if (over > v.max_over_bound) {
              v.max_over_bound = over;
              v.worst = {true, false, b, h, s, x, kv, ov, err, bnd, err / ulp(AFZ_F32, ov), over, name};
            }
            if (err - t.err[e] > bnd) {
              ++v.failing;
              raise(VerdictClass::NumericMismatch,
                    fmt::format("{} = {:a} beyond its bound: oracle {:a}, error {:.3g} = {:.3g} x bound", at, kv, ov,
                                err, over));
            }
          }
        }
  }

  void all() {
    const afz_problem& p = *m.problem().fwd;
    auto qk = [&](const GradTerms& t, size_t e, int n) { return model.dq_dk(t, e, n, slack); };
    auto kk = [&](const GradTerms& t, size_t e, int n) { return model.dq_dk(t, e, n, slack) + model.group_rounding(t, e); };
    auto vv = [&](const GradTerms& t, size_t e, int n) { return model.dv(t, e, n, slack) + model.group_rounding(t, e); };
    tensor(Grad::Q, "dq", r.dq, p.heads_q, p.head_dim, p.seqlens_q, false, qk);
    tensor(Grad::K, "dk", r.dk, p.heads_kv, p.head_dim, p.seqlens_k, true, kk);
    tensor(Grad::V, "dv", r.dv, p.heads_kv, p.head_dim_v, p.seqlens_k, true, vv);
    std::string where;
    if (!m.padding_untouched(&where)) raise(VerdictClass::OutOfBounds, where);
  }
};

// Whether some element's verdict depends on the fast tier's own error.
bool undecided(const Judge& j) {
  const afz_problem& p = *j.m.problem().fwd;
  auto open = [](double err, double oerr, double bound) { return err - oerr <= bound && err + oerr > bound; };
  auto scan = [&](Grad g, const GradTerms& t, int heads, int dim, const int32_t* lens, bool by_key, bool is_v) {
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int s = 0; s < lens[b]; ++s) {
          const int64_t idx = by_key ? j.r.key(b, h, s) : j.r.row(b, h, s);
          const int terms = by_key ? j.r.key_rows[idx] : j.r.visible_keys[idx];
          for (int x = 0; x < dim; ++x) {
            const size_t e = size_t(idx) * dim + x;
            const double kv = j.m.grad_at(g, b, h, s, x);
            if (!std::isfinite(kv)) continue;
            const double bnd = (is_v ? j.model.dv(t, e, terms, j.slack) : j.model.dq_dk(t, e, terms, j.slack)) +
                               (by_key ? j.model.group_rounding(t, e) : 0.0);
            if (open(std::fabs(kv - (t.value[e].hi + t.value[e].lo)), t.err[e], bnd)) return true;
          }
        }
    return false;
  };
  return scan(Grad::Q, j.r.dq, p.heads_q, p.head_dim, p.seqlens_q, false, false) ||
         scan(Grad::K, j.r.dk, p.heads_kv, p.head_dim, p.seqlens_k, true, false) ||
         scan(Grad::V, j.r.dv, p.heads_kv, p.head_dim_v, p.seqlens_k, true, true);
}

}  // namespace

Verdict judge_backward(const afz_backward_kernel& k, const BackwardMaterialized& m, GradResult& r,
                       const BackwardOracle* escalate) {
  const afz_problem& p = *m.problem().fwd;
  GradBoundModel model(k.precision, p.q.dtype, m.problem().out.dtype, p);
  model.store_gradients(k.caps.flags, p.q.dtype, p);
  model.own_forward(k.caps.flags, r);
  const double slack = model.slack(r);
  Verdict out;
  out.o_dtype = AFZ_F32;
  if (slack == 0) {  // scores so large that the declared precision cannot resolve P at all
    out.detail = "outside the precision model (score errors of order one): not judged";
    return out;
  }
  // A kernel that rounds dS to a 16-bit p_dtype for the dQ / dK GEMMs (as
  // FlashAttention does) overflows to inf where the exact dS passes that
  // dtype's range: its declared precision, not a defect (the bound's slack
  // as the margin on the exact value).
  if (const afz_dtype ds_dtype = k.precision.p_dtype == AFZ_P_DTYPE_OF_V ? p.q.dtype : k.precision.p_dtype;
      ds_dtype != AFZ_F32 && r.max_abs_ds * slack >= max_finite(ds_dtype)) {
    out.detail = fmt::format("outside the precision model (an exact dS of {:.3g} passes {}'s range, to which the "
                             "kernel rounds dS): not judged",
                             r.max_abs_ds, dtype_name(ds_dtype));
    return out;
  }
  {
    Judge probe{m, r, model, slack, {}};
    if (escalate && undecided(probe)) {
      r = escalate->compute(p, m.dout());
      out.escalated_rows = int64_t(r.visible_keys.size());
    }
  }
  Judge j{m, r, model, slack, {}};
  j.all();
  j.v.escalated_rows = out.escalated_rows;
  j.v.o_dtype = AFZ_F32;
  return j.v;
}

}  // namespace afz
