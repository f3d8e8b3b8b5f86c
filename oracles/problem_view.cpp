#include "oracles/problem_view.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/abi/dtype.h"

namespace afz::oracle_detail {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("oracle: " + what); }

bool is_value_dtype(afz_dtype t) { return t == AFZ_F32 || t == AFZ_F16 || t == AFZ_BF16 || t == AFZ_F8E4M3; }

// Address of logical element [b][h][s][x] of t.
const void* element(const afz_tensor& t, int64_t b, int64_t h, int64_t s, int64_t x) {
  const int64_t offset = b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3];
  return static_cast<const char*>(t.data) + offset * size_of(t.dtype);
}

std::string at(const char* tensor, int b, int h, int s, int x) {
  return std::string(tensor) + "[b=" + std::to_string(b) + "][h=" + std::to_string(h) + "][" +
         std::to_string(s) + "][" + std::to_string(x) + "]";
}

void check_value_tensor(const afz_tensor& t, const char* name) {
  if (!t.data) fail(std::string(name) + " has no data");
  if (!is_value_dtype(t.dtype))
    fail(std::string(name) + " has dtype " + std::to_string(int(t.dtype)) + ", not a float type");
}

}  // namespace

ProblemView::ProblemView(const afz_problem& p) : p_(p) {
  // The limits keep every index product inside int64 and every count inside int32.
  constexpr int kMaxExtent = 1 << 24;
  if (p.abi_version != AFZ_ABI_VERSION)
    fail("problem has ABI version " + std::to_string(p.abi_version) + ", expected " + std::to_string(AFZ_ABI_VERSION));
  if (p.batch < 0 || p.batch > kMaxExtent) fail("batch " + std::to_string(p.batch) + " out of range");
  if (p.heads_q < 1 || p.heads_kv < 1 || p.heads_q > kMaxExtent || p.heads_q % p.heads_kv != 0)
    fail("heads_q " + std::to_string(p.heads_q) + " is not a positive multiple of heads_kv " +
         std::to_string(p.heads_kv));
  if (p.head_dim < 1 || p.head_dim_v < 1 || p.head_dim > kMaxExtent || p.head_dim_v > kMaxExtent)
    fail("head dims " + std::to_string(p.head_dim) + ", " + std::to_string(p.head_dim_v) + " must be positive");
  if (p.max_seqlen_q < 0 || p.max_seqlen_k < 0 || p.max_seqlen_q > kMaxExtent || p.max_seqlen_k > kMaxExtent)
    fail("max seqlens " + std::to_string(p.max_seqlen_q) + ", " + std::to_string(p.max_seqlen_k) + " out of range");
  if (p.batch > 0 && (!p.seqlens_q || !p.seqlens_k)) fail("seqlens_q / seqlens_k missing");
  for (int b = 0; b < p.batch; ++b) {
    if (p.seqlens_q[b] < 0 || p.seqlens_q[b] > p.max_seqlen_q)
      fail("seqlens_q[" + std::to_string(b) + "] = " + std::to_string(p.seqlens_q[b]) + " outside [0, max_seqlen_q]");
    if (p.seqlens_k[b] < 0 || p.seqlens_k[b] > p.max_seqlen_k)
      fail("seqlens_k[" + std::to_string(b) + "] = " + std::to_string(p.seqlens_k[b]) + " outside [0, max_seqlen_k]");
  }
  check_value_tensor(p.q, "q");
  check_value_tensor(p.k, "k");
  check_value_tensor(p.v, "v");
  if (!std::isfinite(p.scale)) fail("scale is not finite");
  if (!std::isfinite(p.softcap)) fail("softcap is not finite");
  if (p.has_window && p.align != AFZ_ALIGN_TOP_LEFT && p.align != AFZ_ALIGN_BOTTOM_RIGHT)
    fail("unknown alignment " + std::to_string(int(p.align)));
  if (p.bool_mask.data && p.bool_mask.dtype != AFZ_U8) fail("bool_mask must have dtype u8");
  if (p.add_mask.data && !is_value_dtype(p.add_mask.dtype)) fail("add_mask must have a float dtype");
  group_ = p.heads_q / p.heads_kv;
}

RowId ProblemView::row(int64_t r) const {
  RowId id;
  id.r = r;
  id.i = int(r % p_.max_seqlen_q);
  const int64_t bh = r / p_.max_seqlen_q;
  id.h = int(bh % p_.heads_q);
  id.b = int(bh / p_.heads_q);
  return id;
}

void ProblemView::visible_keys(const RowId& id, std::vector<int32_t>& keys, std::vector<double>& add) const {
  keys.clear();
  add.clear();
  const int sq = p_.seqlens_q[id.b], sk = p_.seqlens_k[id.b];
  if (id.i >= sq) return;  // padding row
  // The band, in int64: i + offset +- window cannot overflow there.
  int64_t lo = 0, hi = sk;  // [lo, hi)
  if (p_.has_window) {
    const int64_t offset = p_.align == AFZ_ALIGN_BOTTOM_RIGHT ? int64_t(sk) - sq : 0;
    const int64_t diag = id.i + offset;  // the key aligned with query i
    if (p_.window_left >= 0) lo = std::max<int64_t>(lo, diag - p_.window_left);
    if (p_.window_right >= 0) hi = std::min<int64_t>(hi, diag + p_.window_right + 1);
  }
  for (int64_t j = lo; j < hi; ++j) {
    if (p_.bool_mask.data && load(AFZ_U8, element(p_.bool_mask, id.b, id.h, id.i, j)) == 0) continue;
    double a = 0;
    if (p_.add_mask.data) {
      a = load(p_.add_mask.dtype, element(p_.add_mask, id.b, id.h, id.i, j));
      if (a == -std::numeric_limits<double>::infinity()) continue;  // exp(-inf) = 0: invisible
      // +inf would take all the weight from every finite key, and NaN has no
      // meaning: neither is an attention mask.
      if (!std::isfinite(a)) fail(at("add_mask", id.b, id.h, id.i, int(j)) + " is " + (std::isnan(a) ? "NaN" : "+inf"));
    }
    keys.push_back(int32_t(j));
    add.push_back(a);
  }
}

void ProblemView::load_q(const RowId& id, double* out) const {
  for (int x = 0; x < p_.head_dim; ++x) {
    out[x] = load(p_.q.dtype, element(p_.q, id.b, id.h, id.i, x));
    if (!std::isfinite(out[x])) fail(at("q", id.b, id.h, id.i, x) + " is not finite");
  }
}

void ProblemView::prepare(OracleResult& out) const {
  out.resize(p_.batch, p_.heads_q, p_.max_seqlen_q, p_.head_dim_v);
}

void ProblemView::check_rows(const OracleResult& out, const std::vector<int64_t>& rows) const {
  if (out.batch != p_.batch || out.heads_q != p_.heads_q || out.max_sq != p_.max_seqlen_q || out.dv != p_.head_dim_v ||
      int64_t(out.o.size()) != out.rows() * out.dv)
    fail("compute_rows: the result was not sized for this problem");
  for (int64_t r : rows)
    if (r < 0 || r >= this->rows()) fail("compute_rows: row " + std::to_string(r) + " does not exist");
}

KvCache::KvCache(const ProblemView& view, int pad)
    : view_(view),
      k_stride_((view.head_dim() + pad - 1) / pad * pad),
      v_stride_((view.head_dim_v() + pad - 1) / pad * pad) {}

void KvCache::load(int b, int hk) {
  if (b == b_ && hk == hk_) return;
  const afz_problem& p = view_.problem();
  const int sk = p.seqlens_k[b];
  k_.assign(size_t(sk) * k_stride_, 0.0f);
  v_.assign(size_t(sk) * v_stride_, 0.0f);
  finite_.assign(size_t(sk), 1);
  for (int j = 0; j < sk; ++j) {
    bool finite = true;
    for (int x = 0; x < p.head_dim; ++x) {
      const double kx = afz::load(p.k.dtype, element(p.k, b, hk, j, x));
      finite = finite && std::isfinite(kx);
      k_[size_t(j) * k_stride_ + x] = float(kx);  // exact: every input dtype is a subset of fp32
    }
    for (int x = 0; x < p.head_dim_v; ++x) {
      const double vx = afz::load(p.v.dtype, element(p.v, b, hk, j, x));
      finite = finite && std::isfinite(vx);
      v_[size_t(j) * v_stride_ + x] = float(vx);
    }
    finite_[j] = finite;
  }
  b_ = b;
  hk_ = hk;
}

void KvCache::require_finite(int j) const {
  if (finite_[j]) return;
  const afz_problem& p = view_.problem();
  for (int x = 0; x < p.head_dim; ++x)
    if (!std::isfinite(k(j)[x])) fail(at("k", b_, hk_, j, x) + " is not finite");
  for (int x = 0; x < p.head_dim_v; ++x)
    if (!std::isfinite(v(j)[x])) fail(at("v", b_, hk_, j, x) + " is not finite");
}

double scaled_abs_dot(const double* q, const float* k, int d, double scale) {
  double s = 0;
  for (int x = 0; x < d; ++x) s += std::fabs(q[x] * k[x]);
  return std::fabs(scale) * s;
}

void CondTerms::begin(int dv) {
  dv_ = dv;
  n_ = 0;
  cond_.assign(dv, 0.0);
  cond_score_.assign(dv, 0.0);
  abs_v_.assign(dv, 0.0);
  lse_cond_score_ = max_abs_score_ = max_sigma_ = 0;
  max_w_ = -1;
  max_key_ = -1;
}

void CondTerms::add_key(double w, double sigma, double abs_score, const float* v) {
  if (w > max_w_) {
    max_w_ = w;
    max_key_ = n_;
  }
  ++n_;
  const double ws = w * sigma;
  for (int x = 0; x < dv_; ++x) {
    const double av = std::fabs(double(v[x]));
    cond_[x] += w * av;
    cond_score_[x] += ws * av;
    abs_v_[x] += av;
  }
  lse_cond_score_ += ws;
  max_abs_score_ = std::max(max_abs_score_, abs_score);
  max_sigma_ = std::max(max_sigma_, sigma);
}

void CondTerms::finish(double l, int64_t r, OracleResult& out) const {
  for (int x = 0; x < dv_; ++x) {
    const int64_t e = r * out.dv + x;
    out.cond[e] = cond_[x];
    out.cond_score[e] = cond_score_[x];
    out.cond_tiny[e] = abs_v_[x] / l;
  }
  out.lse_cond_score[r] = lse_cond_score_;
  out.max_abs_score[r] = max_abs_score_;
  out.max_sigma[r] = max_sigma_;
  out.visible_keys[r] = n_;
  out.max_key[r] = max_key_;
  out.empty[r] = 0;
}

void write_empty_row(OracleResult& out, int64_t r) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  for (int x = 0; x < out.dv; ++x) {
    const int64_t e = r * out.dv + x;
    out.o[e] = DD{0.0, 0.0};
    out.cond[e] = out.cond_score[e] = out.cond_tiny[e] = out.o_err[e] = 0.0;
  }
  out.lse[r] = DD{kNegInf, 0.0};
  out.empty[r] = 1;
  out.lse_cond_score[r] = out.max_abs_score[r] = out.max_sigma[r] = out.lse_err[r] = 0.0;
  out.visible_keys[r] = 0;
  out.max_key[r] = -1;
}

}  // namespace afz::oracle_detail
