// The backward bound's charge for O's rounding (backward_verdict.h): a
// kernel computing D = dO . O from the O it is given (the exact O rounded to
// the output dtype) passes with margin, also where D cancels (|dO . O| far
// below sum |dO||O|); one whose D is a few ulps of the output dtype further
// off fails.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/case/backward_problem.h"
#include "harness/case/case_io.h"
#include "harness/case/materialize.h"
#include "harness/judge/backward_verdict.h"
#include "kernels/abi/dtype.h"
#include "kernels/cpu/backward_fa2.h"
#include "kernels/cpu/backward_kernels.h"
#include "oracles/backward_oracle.h"
#include "tests/harness/case_from_text.h"

namespace afz {
namespace {

Case parse(const std::string& body) { return testing::case_from_text(body); }

// D's terms from O moved kUlps ulps of the output dtype in the direction of
// dO's sign: every term errs upwards, so D is off by sum kUlps ulp(O)|dO|
// >= kUlps u_o B (ulp(x) > u |x|).
template <afz_dtype kOut, int kUlps>
struct PerturbedD : cpu::Fa2BwdSteps {
  static float d_term(float dout, float o) {
    const double step = kUlps * ulp(kOut, o);
    return dout * float(dout >= 0 ? o + step : o - step);
  }
};

afz_backward_kernel with_run(int (*run)(const afz_backward_kernel*, const afz_backward_problem*, char*, size_t)) {
  afz_backward_kernel k = *find_backward_kernel("cpu.bwd.fa2");
  k.run = run;
  return k;
}

struct Outcome {
  Verdict v;
  double worst_cancel = 1;  // the smallest |D| / sum|dO||O| over the rows with keys
  double dq_dk_over = 0;    // the largest error / bound over dQ and dK (what D reaches; dV does not read D)
};

// The largest error / bound over the dQ and dK elements of rows and keys.
double dq_dk_over_bound(const afz_backward_kernel& k, const BackwardMaterialized& bm, const GradResult& r) {
  const afz_problem& p = *bm.problem().fwd;
  const GradBoundModel model(k.precision, p.q.dtype, bm.problem().out.dtype, p);
  const double slack = model.slack(r);
  double worst = 0;
  using Grad = BackwardMaterialized::Grad;
  auto scan = [&](Grad g, const GradTerms& t, int heads, const int32_t* lens, bool by_key) {
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int s = 0; s < lens[b]; ++s) {
          const int64_t idx = by_key ? r.key(b, h, s) : r.row(b, h, s);
          const int terms = by_key ? r.key_rows[idx] : r.visible_keys[idx];
          for (int x = 0; x < p.head_dim; ++x) {
            const size_t e = size_t(idx) * p.head_dim + x;
            const double err = std::fabs(bm.grad_at(g, b, h, s, x) - (t.value[e].hi + t.value[e].lo));
            worst = std::max(worst, err / model.dq_dk(t, e, terms, slack));
          }
        }
  };
  scan(Grad::Q, r.dq, p.heads_q, p.seqlens_q, false);
  scan(Grad::K, r.dk, p.heads_kv, p.seqlens_k, true);
  return worst;
}

// Materializes c; with `cancel`, rewrites dO so that each row's dO . O
// cancels (dO_2m = O_2m+1, dO_2m+1 = -O_2m, rounded to the input dtype);
// then runs k and judges it.
Outcome judge(const Case& c, const afz_backward_kernel& k, bool cancel) {
  Materialized m(c);
  BackwardMaterialized bm(m);
  const auto fast = make_fast_backward_oracle();
  GradResult r = fast->compute(m.problem(), bm.dout());
  const afz_problem& p = m.problem();
  const int dv = p.head_dim_v;
  if (cancel) {
    afz_tensor& d = bm.problem().dout;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.seqlens_q[b]; ++i)
          for (int x = 0; x + 1 < dv; x += 2) {
            const DD* o = &r.o[r.row(b, h, i) * dv + x];
            const int64_t at = b * d.stride[0] + h * d.stride[1] + i * d.stride[2] + x * d.stride[3];
            char* base = static_cast<char*>(d.data);
            store(d.dtype, base + at * size_of(d.dtype), o[1].hi);
            store(d.dtype, base + (at + d.stride[3]) * size_of(d.dtype), -o[0].hi);
          }
    r = fast->compute(p, bm.dout());
  }
  Outcome out;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.seqlens_q[b]; ++i) {
        if (r.empty[r.row(b, h, i)]) continue;
        double dsum = 0, abs_sum = 0;
        for (int x = 0; x < dv; ++x) {
          const afz_tensor& d = bm.dout();
          const int64_t at = b * d.stride[0] + h * d.stride[1] + i * d.stride[2] + x * d.stride[3];
          const double g = load(d.dtype, static_cast<const char*>(d.data) + at * size_of(d.dtype));
          const double o = r.o[r.row(b, h, i) * dv + x].hi;
          dsum += g * o;
          abs_sum += std::fabs(g * o);
        }
        if (abs_sum > 0) out.worst_cancel = std::min(out.worst_cancel, std::fabs(dsum) / abs_sum);
      }
  bm.set_forward_outputs(r);
  bm.poison_outputs();
  char error[256] = {};
  EXPECT_EQ(k.run(&k, &bm.problem(), error, sizeof error), 0) << error;
  const auto precise = make_escalation_backward_oracle();
  out.v = judge_backward(k, bm, r, precise.get());
  out.dq_dk_over = dq_dk_over_bound(k, bm, r);
  return out;
}

// The given O is stored in the output dtype: bf16 and fp16 cases, with many
// keys per row (O is not a representable v), the ordinary dO and one whose
// D cancels to a few ulps of sum |dO||O|.
const char* const kRoundedOCases[] = {
    "seqlen_q 24\nseqlen_k 90\nhead_dim 32\ndtype bf16\nseed 3\n",
    "seqlen_q 24\nseqlen_k 90\nhead_dim 32\ndtype fp16\nseed 4\n",
    "heads 4 2\nseqlen_q 17\nseqlen_k 130\nhead_dim 64\ndtype bf16\ncausal bottom_right\nseed 5\n",
    "seqlen_q 9\nseqlen_k 300\nhead_dim 16\ndtype fp16\ntransform late_max count=3 boost=8\nseed 6\n",
};
// Margin a correct kernel keeps under its bound on these, over dQ and dK
// (dV does not read D; its worst is P's rounding to the input dtype).
constexpr double kMargin = 0.5;
// D cancelled to at most this fraction of sum |dO||O| on some row.
constexpr double kHeavyCancellation = 0x1p-6;

TEST(BackwardBound, DFromTheGivenRoundedOPassesWithMargin) {
  const afz_backward_kernel& ref = *find_backward_kernel("cpu.bwd.fa2");
  double worst = 0;
  for (const char* text : kRoundedOCases)
    for (bool cancel : {false, true}) {
      const Case c = parse(text);
      const Outcome o = judge(c, ref, cancel);
      EXPECT_EQ(o.v.cls, VerdictClass::Pass) << o.v.detail << "\n" << text;
      EXPECT_LT(o.dq_dk_over, kMargin) << text << (cancel ? "(cancelling dO)" : "");
      EXPECT_GT(o.dq_dk_over, 0.0) << text;  // the comparison ran on nonzero errors
      worst = std::max(worst, o.dq_dk_over);
      if (cancel) {
        EXPECT_LT(o.worst_cancel, kHeavyCancellation) << text;
      }
    }
  RecordProperty("worst_dq_dk_over_bound", std::to_string(worst));
}

// The stored O really is the rounded one (not fp32): its bits are the exact
// O's rounded once to the output dtype, and the tensor says so.
TEST(BackwardBound, TheGivenOIsStoredInTheOutputDtype) {
  for (const char* text : kRoundedOCases) {
    const Case c = parse(text);
    Materialized m(c);
    BackwardMaterialized bm(m);
    const GradResult r = make_fast_backward_oracle()->compute(m.problem(), bm.dout());
    bm.set_forward_outputs(r);
    const afz_tensor& o = bm.problem().out;
    ASSERT_EQ(o.dtype, c.out_dtype);
    int inexact = 0;
    for (size_t e = 0; e < r.o.size(); ++e) {
      const double stored = load(o.dtype, static_cast<const char*>(o.data) + e * size_of(o.dtype));
      EXPECT_EQ(stored, round_to(o.dtype, r.o[e].hi, r.o[e].lo)) << e;
      inexact += stored != r.o[e].hi;
    }
    EXPECT_GT(inexact, 0) << text;  // the rounding the bound must pay for did happen
  }
}

// A forward output beyond the output dtype's range is no input to judge a
// backward on: one line, not an Inf O.
TEST(BackwardBound, AnOThatOverflowsTheOutputDtypeIsRefused) {
  const Case c = parse("seqlen_q 3\nseqlen_k 4\nhead_dim 8\ndtype fp32 fp16\ntransform scale_v factor=1e6\nseed 2\n");
  Materialized m(c);
  BackwardMaterialized bm(m);
  const GradResult r = make_fast_backward_oracle()->compute(m.problem(), bm.dout());
  try {
    bm.set_forward_outputs(r);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("overflows the output dtype fp16"), std::string::npos) << e.what();
  }
}

// D a few ulps (of the output dtype, at sum |dO||O|) beyond the rounding of
// O: caught on bf16 and fp16.  Rows with one visible key (causal, top-left)
// have dS = P (dP - D) = 0 exactly, so the D error is all there is; the
// unperturbed kernel passes the same cases.
TEST(BackwardBound, DAFewUlpsBeyondTheRoundingIsCaught) {
  struct Row {
    const char* text;
    afz_backward_kernel perturbed;
  };
  const Row rows[] = {
      {"seqlen_q 16\nseqlen_k 16\nhead_dim 16\ndtype bf16\ncausal top_left\nseed 8\n",
       with_run(cpu::fa2_backward_entry<PerturbedD<AFZ_BF16, 4>>)},
      {"seqlen_q 16\nseqlen_k 16\nhead_dim 16\ndtype fp16\ncausal top_left\nseed 9\n",
       with_run(cpu::fa2_backward_entry<PerturbedD<AFZ_F16, 4>>)},
  };
  for (const Row& row : rows) {
    const Case c = parse(row.text);
    EXPECT_EQ(judge(c, *find_backward_kernel("cpu.bwd.fa2"), false).v.cls, VerdictClass::Pass) << row.text;
    const Verdict v = judge(c, row.perturbed, false).v;
    EXPECT_EQ(v.cls, VerdictClass::NumericMismatch) << row.text;
    EXPECT_TRUE(v.worst.tensor == "dq" || v.worst.tensor == "dk") << v.worst.tensor;  // D reaches only dS
  }
}

// ---- Gradients stored in the input dtype (AFZ_CAP_GRADS_IN_INPUT_DTYPE) ----

// The reference backward, then every written gradient rounded to the input
// dtype, as PyTorch's and cuDNN's backward operators return them.
int run_rounded_grads(const afz_backward_kernel*, const afz_backward_problem* p, char* e, size_t n) {
  const afz_backward_kernel& ref = *find_backward_kernel("cpu.bwd.fa2");
  if (int rc = ref.run(&ref, p, e, n); rc != 0) return rc;
  const afz_problem& f = *p->fwd;
  for (const afz_tensor* t : {&p->dq, &p->dk, &p->dv}) {
    float* g = static_cast<float*>(t->data);
    for (int64_t i = 0; i < int64_t(f.batch) * t->stride[0]; ++i)
      if (bits_of(g[i]) != kPoisonF32) g[i] = float(round_to(f.q.dtype, g[i]));
  }
  return 0;
}

TEST(BackwardBound, GradientsRoundedToTheInputDtypeNeedTheirDeclaration) {
  // 90 keys per row: a bound tight enough that bf16's rounding (2^-9) of
  // the gradients is beyond it unless declared.
  const char* tight = "seqlen_q 24\nseqlen_k 90\nhead_dim 32\ndtype bf16\nseed 3\n";
  afz_backward_kernel k = with_run(&run_rounded_grads);
  EXPECT_EQ(judge(parse(tight), k, false).v.cls, VerdictClass::NumericMismatch);
  k.caps.flags |= AFZ_CAP_GRADS_IN_INPUT_DTYPE;
  // Declared, it passes there and under GQA (the group's sums too).
  for (const char* text : {tight, "heads 4 2\nseqlen_q 17\nseqlen_k 130\nhead_dim 64\ndtype fp16\nseed 5\n"}) {
    SCOPED_TRACE(text);
    const Outcome o = judge(parse(text), k, false);
    EXPECT_EQ(o.v.cls, VerdictClass::Pass) << o.v.detail;
    EXPECT_GT(o.v.max_over_bound, 0x1p-4) << "the rounding is a real share of the bound";
  }
}

TEST(BackwardBound, GroupRoundingIsChargedOnlyUnderGqaWithRoundedGradients) {
  auto model_for = [](const char* text, uint32_t flags) {
    const Case c = parse(text);
    Materialized m(c);
    GradBoundModel model(find_backward_kernel("cpu.bwd.fa2")->precision, m.problem().q.dtype, c.out_dtype, m.problem());
    model.store_gradients(flags, m.problem().q.dtype, m.problem());
    return model;
  };
  const char* gqa = "heads 4 2\nseqlen_q 4\nseqlen_k 4\nhead_dim 8\ndtype bf16\nseed 1\n";
  const char* mha = "heads 2 2\nseqlen_q 4\nseqlen_k 4\nhead_dim 8\ndtype bf16\nseed 1\n";
  EXPECT_EQ(model_for(gqa, 0).u_group, 0.0);
  EXPECT_EQ(model_for(gqa, 0).grad_dtype, AFZ_F32);
  EXPECT_EQ(model_for(mha, AFZ_CAP_GRADS_IN_INPUT_DTYPE).u_group, 0.0);
  EXPECT_EQ(model_for(mha, AFZ_CAP_GRADS_IN_INPUT_DTYPE).grad_dtype, AFZ_BF16);
  EXPECT_EQ(model_for(gqa, AFZ_CAP_GRADS_IN_INPUT_DTYPE).u_group, unit_roundoff(AFZ_BF16));
}

// One key per row: P = 1, so dV_j = sum_i dO_i, which passes fp16's 65504
// over 256 rows of dO ~ N(0, 8000^2) while dO itself stays in range; its
// correct rounding to fp16 is inf, which is then no defect.
TEST(BackwardBound, AGradientPastTheStorageRangeMayBeInf) {
  const char* text = "seqlen_q 256\nseqlen_k 1\nhead_dim 8\ndtype fp16\nvalues_do normal 8000\nseed 9\n";
  afz_backward_kernel k = with_run(&run_rounded_grads);
  k.caps.flags |= AFZ_CAP_GRADS_IN_INPUT_DTYPE;
  const Outcome o = judge(parse(text), k, false);
  EXPECT_EQ(o.v.cls, VerdictClass::Pass) << o.v.detail;
}

// V at fp16's largest finite values (the CI campaign's case 106): the
// exact dS = P (dP - D) passes 65504, so the reference, which rounds dS to
// fp16 as FlashAttention does, overflows by its declared precision: not
// judged, and not a nan_inf.
TEST(BackwardBound, AnExactDsPastTheP16RangeIsOutsideThePrecisionModel) {
  const char* text =
      "seqlen_q 1\nseqlen_k 74\nhead_dim 29\ndtype fp16\nvalues_q normal 1\nvalues_k int 3\nvalues_v normal 1\n"
      "transform special_values kind=2 permil=500\nseed 0x55f485c46fa9cd94\n";
  const Outcome o = judge(parse(text), *find_backward_kernel("cpu.bwd.fa2"), false);
  EXPECT_EQ(o.v.cls, VerdictClass::Pass) << o.v.detail;
  EXPECT_NE(o.v.detail.find("passes fp16's range"), std::string::npos) << o.v.detail;
  // Without the largest values the same case is judged, and passes.
  std::string plain = text;
  plain.erase(plain.find("transform"), plain.find("seed") - plain.find("transform"));
  const Outcome b = judge(parse(plain), *find_backward_kernel("cpu.bwd.fa2"), false);
  EXPECT_EQ(b.v.cls, VerdictClass::Pass) << b.v.detail;
  EXPECT_GT(b.v.elements, 0) << b.v.detail;
}

// ---- A kernel that differentiates its own forward (AFZ_CAP_BWD_OWN_FORWARD) ----

// The fp32 torch.math [bwd] failures of the H200 backward audits
// (reports/backward, issue 14), as saved there: scores of order 1e4 (a planted
// 1e4 under a -1e4 additive band, every score shifted by +-1e4) and a planted
// maximum of 20 over 256 keys.  An fp32 emulation of PyTorch's math path
// (tests/kernels/torch/math_emulation) reproduces each H200 gradient to 2-3
// digits (the late_max dV bit for bit); so does cpu.bwd.math.
const char* const kH200MathCases[] = {
    // late_max: dQ 3.6 x, dV 249 x the fused model's bound on the H200
    "batch 3\nheads 4 2\nseqlen_q 12 6 1\nseqlen_k 191 174 0\nhead_dim 8\ndtype fp32\nadd_mask -10000 band -20 4\n"
    "row_gap 3\ntransform late_max count=2 boost=10000\nseed 0xf57766e4de74ffc2\n",
    // shift_scores -1e4: dK 1.74 x
    "batch 3\nheads 2\nseqlen_q 2 1 1\nseqlen_k 82 65 0\nhead_dim 256\ndtype fp32\nscale 0.10206207633018494\n"
    "add_mask -inf random 500\nlayout packed_qkv\ntransform shift_scores offset=-10000\nseed 0x99c0d056b40fec97\n",
    // shift_scores +1e4: dK 1.26 x
    "batch 3\nheads 4 2\nseqlen_q 2 1 1\nseqlen_k 86 69 0\nhead_dim 128\ndtype fp32\nscale 0.125\n"
    "add_mask -inf rows_every 3 1\nkv_broadcast heads\ntransform shift_scores offset=10000\nseed 0xe1493a2e9fa904bc\n",
    // early_max over 256 keys: dV 1.2 x
    "batch 2\nheads 4 2\nseqlen_q 2 0\nseqlen_k 256 6\nhead_dim 33\ndtype fp32\nscale 0.10206207633018494\n"
    "bool_mask cols_every 5 2\nkv_broadcast heads\ntransform early_max count=1 boost=20\nseed 0x7e221eba4a0c5811\n",
};

// Judged as if it read the given LSE and O (the fused model), the math
// path's own normalization and D fail every one of them; declared, they pass.
TEST(OwnForwardBound, TheH200MathPathCasesNeedTheOwnForwardTerms) {
  const afz_backward_kernel& math = *find_backward_kernel("cpu.bwd.math");
  ASSERT_TRUE(math.caps.flags & AFZ_CAP_BWD_OWN_FORWARD);
  afz_backward_kernel as_fused = math;
  as_fused.caps.flags &= ~uint32_t(AFZ_CAP_BWD_OWN_FORWARD);
  double worst = 0;
  for (const char* text : kH200MathCases) {
    SCOPED_TRACE(text);
    const Case c = parse(text);
    const Verdict fused = judge(c, as_fused, false).v;
    EXPECT_EQ(fused.cls, VerdictClass::NumericMismatch) << fused.detail;
    EXPECT_GT(fused.max_over_bound, 1.0);
    const Verdict own = judge(c, math, false).v;
    EXPECT_EQ(own.cls, VerdictClass::Pass) << own.detail;
    EXPECT_GT(own.elements, 0) << "judged, not outside the precision model: " << own.detail;
    worst = std::max(worst, own.max_over_bound);
  }
  RecordProperty("worst_over_bound", std::to_string(worst));
}

// The own-forward terms are the declaration's alone: a fused kernel's
// bound is the same number with or without the call.
TEST(OwnForwardBound, OnlyTheDeclarationAddsTheTerms) {
  const Case c = parse(kH200MathCases[0]);
  Materialized m(c);
  BackwardMaterialized bm(m);
  const GradResult r = make_fast_backward_oracle()->compute(m.problem(), bm.dout());
  const afz_backward_kernel& fa2 = *find_backward_kernel("cpu.bwd.fa2");
  const GradBoundModel plain(fa2.precision, AFZ_F32, c.out_dtype, m.problem());
  GradBoundModel undeclared = plain, declared = plain;
  undeclared.own_forward(fa2.caps.flags, r);
  declared.own_forward(fa2.caps.flags | AFZ_CAP_BWD_OWN_FORWARD, r);
  const double slack = plain.slack(r);
  EXPECT_EQ(undeclared.slack(r), slack);
  EXPECT_GT(declared.slack(r), slack);
  int larger = 0;
  for (size_t e = 0; e < r.dq.value.size(); ++e) {
    EXPECT_EQ(undeclared.dq_dk(r.dq, e, 1, slack), plain.dq_dk(r.dq, e, 1, slack));
    larger += declared.dq_dk(r.dq, e, 1, slack) > plain.dq_dk(r.dq, e, 1, slack);
  }
  for (size_t e = 0; e < r.dv.value.size(); ++e)
    EXPECT_EQ(undeclared.dv(r.dv, e, 1, slack), plain.dv(r.dv, e, 1, slack));
  EXPECT_GT(larger, 0);
}

}  // namespace
}  // namespace afz
