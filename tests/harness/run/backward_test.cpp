// The backward pass: the dO recipe, the gradient oracles (against each other
// and against finite differences of the exact forward), the reference
// backward kernel, and the backward mutant gate.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/case/backward_problem.h"
#include "harness/case/case_io.h"
#include "harness/case/generators.h"
#include "harness/case/materialize.h"
#include "harness/judge/backward_verdict.h"
#include "harness/run/backward_runner.h"
#include "kernels/abi/dtype.h"
#include "kernels/cpu/backward_kernels.h"
#include "kernels/registry.h"
#include "oracles/backward_oracle.h"
#include "oracles/oracle.h"
#include "tests/harness/case_from_text.h"

namespace afz {
namespace {

Case parse(const std::string& body) { return testing::case_from_text(body); }

const std::string kSoftcapGqa =
    "batch 2\nheads 4 2\nseqlen_q 5 3\nseqlen_k 9 0\nhead_dim 8 6\ndtype fp32\nsoftcap 3\ncausal bottom_right\nseed 7\n";

TEST(BackwardCase, DoRecipeParsesWritesAndValidates) {
  Case c = parse("values_do uniform 2\nseed 1\n");
  EXPECT_EQ(c.values_do.kind, "uniform");
  EXPECT_EQ(c.values_do.param, 2.0);
  EXPECT_NE(write_case(c).find("values_do uniform 2"), std::string::npos);
  EXPECT_EQ(parse_case(write_case(c), nullptr), c);
  // The default is not written: forward-only case files keep their text.
  EXPECT_EQ(write_case(parse("seed 1\n")).find("values_do"), std::string::npos);
  ParseError err;
  EXPECT_FALSE(parse_case("attnfuzz-case 1\nvalues_do normal -1\n", &err));
  EXPECT_EQ(err.field, "values_do");
}

TEST(BackwardCase, DoHasItsOwnStream) {
  Case a = parse("seqlen_q 4\nseqlen_k 4\nhead_dim 8\nseed 3\n"), b = a;
  b.values_do = Distribution{"uniform", 1};
  Materialized ma(a), mb(b);
  EXPECT_EQ(ma.input_hash(), mb.input_hash());  // Q, K, V untouched by the dO recipe
  BackwardMaterialized ba(ma), bb(mb);
  EXPECT_NE(load(ba.dout().dtype, ba.dout().data), load(bb.dout().dtype, bb.dout().data));
}

// L = sum dO . O(q, k, v) through the exact forward; dL/dx by central differences.
double loss(const Materialized& m, const afz_tensor& dout) {
  const OracleResult r = make_fast_oracle()->compute(m.problem());
  const afz_problem& p = m.problem();
  double l = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.seqlens_q[b]; ++i)
        for (int x = 0; x < p.head_dim_v; ++x) {
          const int64_t off = b * dout.stride[0] + h * dout.stride[1] + i * dout.stride[2] + x * dout.stride[3];
          l += load(dout.dtype, static_cast<const char*>(dout.data) + off * size_of(dout.dtype)) *
               r.o[r.row_index(b, h, i) * r.dv + x].hi;
        }
  return l;
}

double finite_difference(Materialized& m, const afz_tensor& dout, const afz_tensor& t, int b, int h, int s, int x) {
  char* at = static_cast<char*>(t.data) + (b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3]) * 4;
  const double x0 = load(AFZ_F32, at), step = 0x1p-12;
  store(AFZ_F32, at, x0 + step);
  const double up = loss(m, dout);
  store(AFZ_F32, at, x0 - step);
  const double down = loss(m, dout);
  store(AFZ_F32, at, x0);
  return (up - down) / (2 * step);
}

TEST(BackwardOracle, MatchesFiniteDifferencesWithSoftcapGqaCausalAndEmptySequence) {
  Materialized m(parse(kSoftcapGqa));
  BackwardMaterialized bm(m);
  const GradResult r = make_fast_backward_oracle()->compute(m.problem(), bm.dout());
  const afz_problem& p = m.problem();
  int checked = 0;
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 3; ++s) {
      const double dq = r.dq.value[r.row(b, 1, s) * p.head_dim + 2].hi;
      EXPECT_NEAR(dq, finite_difference(m, bm.dout(), p.q, b, 1, s, 2), 1e-5 * (1 + std::fabs(dq)));
      ++checked;
    }
  for (int j = 0; j < 9; j += 4) {
    // K head 1 is shared by query heads 2 and 3: the difference sees both.
    const double dk = r.dk.value[r.key(0, 1, j) * p.head_dim + 5].hi;
    const double dv = r.dv.value[r.key(0, 1, j) * p.head_dim_v + 1].hi;
    EXPECT_NEAR(dk, finite_difference(m, bm.dout(), p.k, 0, 1, j, 5), 1e-5 * (1 + std::fabs(dk)));
    EXPECT_NEAR(dv, finite_difference(m, bm.dout(), p.v, 0, 1, j, 1), 1e-5 * (1 + std::fabs(dv)));
    checked += 2;
  }
  EXPECT_EQ(checked, 12);
  // Sequence 1 has no key: its rows are empty and their gradients exactly 0.
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(r.empty[r.row(1, 0, i)]);
    for (int x = 0; x < p.head_dim; ++x) EXPECT_EQ(r.dq.value[r.row(1, 0, i) * p.head_dim + x].hi, 0.0);
  }
}

TEST(BackwardOracle, TiersAgreeAndFastStaysInItsBound) {
  for (const std::string& text : {kSoftcapGqa, std::string("seqlen_q 6\nseqlen_k 70\nhead_dim 16\ndtype bf16\n"
                                                           "transform late_max count=3 boost=20\nseed 11\n")}) {
    Materialized m(parse(text));
    BackwardMaterialized bm(m);
    const GradResult f = make_fast_backward_oracle()->compute(m.problem(), bm.dout());
    const GradResult bo = make_boost_backward_oracle()->compute(m.problem(), bm.dout());
    auto mp = make_mpfr_backward_oracle();
    const GradResult mr = mp ? mp->compute(m.problem(), bm.dout()) : bo;
    double worst_fast = 0;
    for (auto [ft, bt, mt] : {std::tuple{&f.dq, &bo.dq, &mr.dq}, std::tuple{&f.dk, &bo.dk, &mr.dk},
                              std::tuple{&f.dv, &bo.dv, &mr.dv}})
      for (size_t e = 0; e < ft->value.size(); ++e) {
        const double exact = bt->value[e].hi + bt->value[e].lo;
        const double fe = std::fabs(ft->value[e].hi - exact);
        EXPECT_LE(fe, ft->err[e]) << e;
        if (ft->err[e] > 0) worst_fast = std::max(worst_fast, fe / ft->err[e]);
        // Boost and MPFR: 100 bits relative to the terms summed.
        const double diff = std::fabs((mt->value[e].hi - bt->value[e].hi) + (mt->value[e].lo - bt->value[e].lo));
        EXPECT_LE(diff, 0x1p-100 * (std::fabs(exact) + bt->rel[e] + bt->cancel[e]) + 0x1p-1070) << e;
      }
    EXPECT_GT(worst_fast, 0.0);  // the comparison did run on nonzero errors somewhere
  }
}

const afz_backward_kernel& reference() { return *find_backward_kernel("cpu.bwd.fa2"); }

TEST(BackwardKernel, ReferencePassesHandWrittenCases) {
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  for (const std::string& text :
       {kSoftcapGqa, std::string("seqlen_q 70\nseqlen_k 130\nhead_dim 32\ndtype bf16\ncausal top_left\nseed 2\n"),
        std::string("batch 3\nseqlen_q 3 0 17\nseqlen_k 0 5 80\nhead_dim 8\ndtype fp16\nwindow 4 2\nseed 5\n"),
        std::string("seqlen_q 9\nseqlen_k 9\nhead_dim 16\ndtype bf16\nbool_mask rows_every 3 0\n"
                    "values_do uniform 100\nseed 9\n")}) {
    const BackwardOutcome o = run_backward_case(reference(), parse(text), *fast, precise.get());
    EXPECT_EQ(o.verdict.cls, VerdictClass::Pass) << o.verdict.detail << "\n" << text;
    EXPECT_LE(o.verdict.max_over_bound, 1.0);
  }
}

TEST(BackwardKernel, ReferencePassesGeneratedCases) {
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  int passed = 0, built = 0;
  double worst = 0;
  for (uint64_t n = 0; n < 60; ++n) {
    const Case c = generate_case(GeneratorMix::defaults(), 1, n).c;
    if (case_work(c) > 2'000'000) continue;  // keep the test fast
    BackwardOutcome o;
    try {
      o = run_backward_case(reference(), c, *fast, precise.get());
    } catch (const std::exception&) {
      continue;
    }
    ++built;
    worst = std::max(worst, o.verdict.max_over_bound);
    if (o.verdict.cls == VerdictClass::Pass || o.verdict.cls == VerdictClass::Unsupported) ++passed;
    else ADD_FAILURE() << o.verdict.detail << "\n" << write_case(c);
  }
  EXPECT_GT(built, 20);
  EXPECT_EQ(passed, built);
  RecordProperty("worst_over_bound", std::to_string(worst));
}

// cpu.bwd.math (PyTorch's math path under autograd, emulated) under its
// own-forward bound, over the backward mix (extreme scores, masked rows, GQA).
TEST(BackwardKernel, MathReferencePassesGeneratedCases) {
  const afz_backward_kernel& math = *find_backward_kernel("cpu.bwd.math");
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  int judged = 0;
  double worst = 0;
  for (uint64_t n = 0; n < 200; ++n) {
    const Case c = generate_case(GeneratorMix::defaults(Pass::Bwd), 1, n).c;
    if (case_work(c) > 2'000'000) continue;  // keep the test fast
    BackwardOutcome o;
    try {
      o = run_backward_case(math, c, *fast, precise.get());
    } catch (const std::exception&) {
      continue;
    }
    if (o.verdict.cls == VerdictClass::Unsupported) continue;  // softcap: the math path has none
    ++judged;
    worst = std::max(worst, o.verdict.max_over_bound);
    EXPECT_EQ(o.verdict.cls, VerdictClass::Pass) << o.verdict.detail << "\n" << write_case(c);
  }
  EXPECT_GT(judged, 100);
  RecordProperty("worst_over_bound", std::to_string(worst));
}

// The own-forward bound is looser than the fused one (a row's every score
// error reaches each of its P and D): every backward mutant, declared as a
// kernel that differentiates its own forward, must still be killed.
TEST(BackwardGate, EveryBackwardMutantIsKilledUnderTheOwnForwardBound) {
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  constexpr int64_t kBudget = 200;
  for (const BackwardMutantInfo& info : cpu_backward_mutants()) {
    if (!info.expected_kill) continue;
    afz_backward_kernel mutant = info.kernel;
    mutant.caps.flags |= AFZ_CAP_BWD_OWN_FORWARD;
    int64_t cases = 0;
    bool killed = false;
    for (uint64_t n = 0; n < uint64_t(kBudget) && !killed; ++n) {
      ++cases;
      try {
        const Case c = generate_case(GeneratorMix::defaults(Pass::Bwd), 1, n).c;
        killed = is_failure(run_backward_case(mutant, c, *fast, precise.get()).verdict.cls);
      } catch (const std::exception&) {
      }
    }
    EXPECT_TRUE(killed) << mutant.name << " survived " << cases << " cases";
    RecordProperty(std::string(mutant.name) + "_cases", std::to_string(cases));
  }
}

TEST(BackwardGate, EveryBackwardMutantIsKilled) {
  for (const BackwardGateRow& row : run_backward_gate(1, 200)) {
    if (!row.expected_kill) continue;
    EXPECT_TRUE(row.killed) << row.kernel << " survived " << row.cases << " cases";
  }
}

// The recast D mutant (D from an unscaled e4m3 copy of O) is a defect on
// every output dtype the gate generates, not only on some: killed within a
// few cases of each.
TEST(BackwardGate, Fp8DMutantIsKilledOnEveryOutputDtype) {
  const afz_backward_kernel* mutant = find_backward_kernel("cpu.bwd.mutant.d_from_fp8_o");
  ASSERT_NE(mutant, nullptr);
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  constexpr int kCasesPerDtype = 40;
  const GeneratorMix mix = GeneratorMix::defaults(Pass::Bwd);
  for (afz_dtype out : {AFZ_BF16, AFZ_F16, AFZ_F32}) {
    int tried = 0, cases_to_kill = -1;
    for (uint64_t n = 0; tried < kCasesPerDtype && cases_to_kill < 0 && n < 4000; ++n) {
      const Case c = generate_case(mix, 1, n).c;
      if (c.out_dtype != out || case_work(c) > 1'000'000) continue;
      ++tried;
      try {
        if (is_failure(run_backward_case(*mutant, c, *fast, precise.get()).verdict.cls)) cases_to_kill = tried;
      } catch (const std::exception&) {
      }
    }
    EXPECT_GT(cases_to_kill, 0) << dtype_name(out) << ": survived " << tried << " cases";
    RecordProperty(std::string("cases_to_kill_") + std::string(dtype_name(out)), cases_to_kill);
  }
}

// A saved failure records its pass: `pass bwd` round-trips, the default is
// not written, so forward case files keep their text.
TEST(BackwardCase, PassIsRecordedInCaseFiles) {
  Case c = parse("pass bwd\nseed 1\n");
  EXPECT_EQ(c.pass, Pass::Bwd);
  EXPECT_NE(write_case(c).find("pass bwd\n"), std::string::npos);
  EXPECT_EQ(parse_case(write_case(c), nullptr), c);
  EXPECT_EQ(write_case(parse("seed 1\n")).find("pass"), std::string::npos);
  EXPECT_EQ(parse_pass("both"), Pass::Both);
  EXPECT_EQ(parse_pass("backward"), std::nullopt);
  EXPECT_EQ(pass_name(Pass::Fwd), "fwd");
}

// The registry holds the built-in backward kernels beside the forward ones,
// and a plugin's attnfuzz_backward_kernels: the example plugin's gradients,
// under its forward kernel's name, pass where it declares support, and a
// backward mutant of the registry fails the same case.
TEST(BackwardKernel, RegistryHoldsBuiltinAndPluginBackwardKernels) {
  KernelRegistry r = KernelRegistry::with_builtins();
  ASSERT_NE(r.find_backward("cpu.bwd.fa2"), nullptr);
  EXPECT_EQ(r.backward_entry("cpu.bwd.fa2")->origin, "builtin");
  EXPECT_EQ(r.backward_entry("cpu.bwd.mutant.lse_log2")->origin, "mutant");
  EXPECT_EQ(r.find_backward("cpu.tiled"), nullptr);  // a forward kernel only
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  const Case c = parse("heads 4 2\nseqlen_q 7\nseqlen_k 11\nhead_dim 16\ndtype fp32\nseed 9\n");
  EXPECT_EQ(run_backward_case(*r.find_backward("cpu.bwd.mutant.lse_log2"), c, *fast, precise.get()).verdict.cls,
            VerdictClass::NumericMismatch);
#if defined(ATTNFUZZ_PLUGIN_EXAMPLE)
  std::string error;
  ASSERT_TRUE(r.load_library(ATTNFUZZ_PLUGIN_EXAMPLE, &error)) << error;
  const afz_backward_kernel* k = r.find_backward("example.naive_fp32");
  ASSERT_NE(k, nullptr);
  ASSERT_NE(r.find("example.naive_fp32"), nullptr);  // `--pass both` pairs them by name
  EXPECT_EQ(r.backward_entry("example.naive_fp32")->origin, ATTNFUZZ_PLUGIN_EXAMPLE);
  EXPECT_EQ(r.backward_entry("example.naive_fp32")->version, "plugin example 1.0 (libm expf)");
  const Verdict v = run_backward_case(*k, c, *fast, precise.get()).verdict;
  EXPECT_EQ(v.cls, VerdictClass::Pass) << v.detail;
  EXPECT_GT(v.elements, 0);
  EXPECT_EQ(v.worst.tensor.substr(0, 1), "d");  // the worst element names its gradient
  // O is given in the output dtype: fp32 inputs with a bf16 or fp16 O (read
  // as fp32 it would be garbage).
  for (const char* out : {"bf16", "fp16"}) {
    const Case narrow = parse("heads 4 2\nseqlen_q 7\nseqlen_k 11\nhead_dim 16\ndtype fp32 " + std::string(out) +
                              "\nseed 9\n");
    const Verdict vo = run_backward_case(*k, narrow, *fast, precise.get()).verdict;
    EXPECT_EQ(vo.cls, VerdictClass::Pass) << out << ": " << vo.detail;
  }
  // What it does not declare is unsupported, never a failure.
  EXPECT_EQ(run_backward_case(*k, parse("dtype bf16\nseed 1\n"), *fast, precise.get()).verdict.cls,
            VerdictClass::Unsupported);
  // Loaded twice: its backward kernel's name is taken too.
  EXPECT_FALSE(r.load_library(ATTNFUZZ_PLUGIN_EXAMPLE, &error));
#endif
}

}  // namespace
}  // namespace afz
