// The test's own torch operators, registered with TORCH_LIBRARY in a small
// shared library that the tests' .ops files load with 'library PATH': the
// plugin's "any operator by name" path, exercised on the CPU of a CPU-only
// libtorch.  Naive attention written with torch ops in fp32, three calling
// conventions:
//
//   afztest::attn         BHSD, optional additive bias and boolean mask,
//                         top-left causal, GQA by repeating K/V heads;
//                         returns (out, lse [B][H][S]); empty rows O = 0, LSE = -inf
//   afztest::attn_bshd    BSHD in and out; returns (lse [B][S][H], out): the
//                         other order, to test the return mapping
//   afztest::attn_varlen  packed tokens with cumulative lengths, bottom-right
//                         causal and windows (FlashAttention's conventions);
//                         returns (out [total][H][Dv], lse [H][total]);
//                         empty rows O = 0, LSE = +inf
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor repeat_heads(const at::Tensor& kv, int64_t heads_q, int64_t head_dim) {
  const int64_t heads_kv = kv.size(head_dim);
  return heads_kv == heads_q ? kv : kv.repeat_interleave(heads_q / heads_kv, head_dim);
}

// Softmax attention over the last two dims of s ([..][sq][sk]), with `keep`
// (bool, broadcastable) selecting visible keys; empty rows give O = 0 and
// LSE = empty_lse.
std::tuple<at::Tensor, at::Tensor> softmax_pv(at::Tensor s, const at::Tensor& keep, const at::Tensor& v,
                                              double empty_lse) {
  if (keep.defined()) s = s.masked_fill(keep.logical_not(), -kInf);
  at::Tensor m = std::get<0>(s.max(-1, /*keepdim=*/true));
  const at::Tensor empty = m.eq(-kInf);
  m = m.masked_fill(empty, 0.0);
  const at::Tensor p = (s - m).exp();
  const at::Tensor l = p.sum(-1, /*keepdim=*/true);
  at::Tensor out = at::matmul(p, v) / l;
  out = out.masked_fill(empty, 0.0);
  at::Tensor lse = (m + l.log()).squeeze(-1).masked_fill(empty.squeeze(-1), empty_lse);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor> attn(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const c10::optional<at::Tensor>& bias, const c10::optional<at::Tensor>& mask,
                                        double scale, bool is_causal) {
  const at::Tensor qf = q.to(at::kFloat);
  const at::Tensor kf = repeat_heads(k.to(at::kFloat), q.size(1), 1);
  const at::Tensor vf = repeat_heads(v.to(at::kFloat), q.size(1), 1);
  at::Tensor s = at::matmul(qf, kf.transpose(-2, -1)) * scale;
  if (bias && bias->defined()) s = s + bias->to(at::kFloat);
  at::Tensor keep;
  if (mask && mask->defined()) keep = mask->to(at::kBool);
  if (is_causal) {
    const at::Tensor tri = at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).tril();
    keep = keep.defined() ? keep.logical_and(tri) : tri;
  }
  if (k.size(2) == 0) {  // no key at all: every row is empty
    return {at::zeros({q.size(0), q.size(1), q.size(2), v.size(3)}, qf.options()),
            at::full({q.size(0), q.size(1), q.size(2)}, -kInf, qf.options())};
  }
  return softmax_pv(s, keep, vf, -kInf);
}

std::tuple<at::Tensor, at::Tensor> attn_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             double scale) {
  auto [out, lse] = attn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), c10::nullopt, c10::nullopt, scale,
                         false);
  return {lse.transpose(1, 2), out.transpose(1, 2)};
}

std::tuple<at::Tensor, at::Tensor> attn_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& cu_q, const at::Tensor& cu_k, int64_t max_q,
                                               int64_t max_k, double scale, bool is_causal, int64_t window_left,
                                               int64_t window_right) {
  (void)max_q;
  (void)max_k;
  const int64_t heads = q.size(1), total_q = q.size(0);
  at::Tensor out = at::zeros({total_q, heads, v.size(2)}, q.options().dtype(at::kFloat));
  at::Tensor lse = at::full({heads, total_q}, kInf, q.options().dtype(at::kFloat));
  const at::Tensor cq = cu_q.cpu(), ck = cu_k.cpu();
  if (is_causal) window_right = 0;
  for (int64_t b = 0; b + 1 < cq.size(0); ++b) {
    const int64_t q0 = cq[b].item<int64_t>(), sq = cq[b + 1].item<int64_t>() - q0;
    const int64_t k0 = ck[b].item<int64_t>(), sk = ck[b + 1].item<int64_t>() - k0;
    if (sq == 0 || sk == 0) continue;
    const at::Tensor qb = q.narrow(0, q0, sq).transpose(0, 1).to(at::kFloat);  // [H][sq][D]
    const at::Tensor kb = repeat_heads(k.narrow(0, k0, sk).transpose(0, 1).to(at::kFloat), heads, 0);
    const at::Tensor vb = repeat_heads(v.narrow(0, k0, sk).transpose(0, 1).to(at::kFloat), heads, 0);
    const at::Tensor s = at::matmul(qb, kb.transpose(-2, -1)) * scale;
    // Bottom-right: query i sees key j iff i + off - left <= j <= i + off + right.
    const at::Tensor i = at::arange(sq, q.options().dtype(at::kLong)).unsqueeze(1) + (sk - sq);
    const at::Tensor j = at::arange(sk, q.options().dtype(at::kLong)).unsqueeze(0);
    at::Tensor keep = at::ones({sq, sk}, q.options().dtype(at::kBool));
    if (window_left >= 0) keep = keep.logical_and(j.ge(i - window_left));
    if (window_right >= 0) keep = keep.logical_and(j.le(i + window_right));
    auto [ob, lb] = softmax_pv(s, keep, vb, kInf);
    out.narrow(0, q0, sq).copy_(ob.transpose(0, 1));
    lse.narrow(1, q0, sq).copy_(lb);
  }
  return {out, lse};
}

}  // namespace

TORCH_LIBRARY(afztest, m) {
  m.def("attn(Tensor q, Tensor k, Tensor v, Tensor? bias=None, Tensor? mask=None, float scale=1.0, "
        "bool is_causal=False) -> (Tensor out, Tensor lse)");
  m.def("attn_bshd(Tensor q, Tensor k, Tensor v, float scale) -> (Tensor lse, Tensor out)");
  m.def("attn_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_q, int max_k, "
        "float scale, bool is_causal, int window_left=-1, int window_right=-1) -> (Tensor out, Tensor lse)");
}

TORCH_LIBRARY_IMPL(afztest, CPU, m) {
  m.impl("attn", &attn);
  m.impl("attn_bshd", &attn_bshd);
  m.impl("attn_varlen", &attn_varlen);
}
