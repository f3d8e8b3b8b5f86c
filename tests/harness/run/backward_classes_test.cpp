// The backward generator classes (harness/case/generators.cpp, flagged
// `backward`): every case builds and cpu.bwd.fa2 passes it through the
// backward verdict, and every case hits the property its class is for.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "harness/case/backward_problem.h"
#include "harness/case/case_io.h"
#include "harness/case/generators.h"
#include "harness/case/materialize.h"
#include "harness/judge/backward_verdict.h"
#include "harness/run/backward_runner.h"
#include "kernels/abi/dtype.h"
#include "kernels/cpu/backward_kernels.h"
#include "oracles/backward_oracle.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 20261201;
constexpr int kCasesPerClass = 16;

const afz_backward_kernel& reference() { return *find_backward_kernel("cpu.bwd.fa2"); }

// One case through the reference with everything kept for inspection.
struct Judged {
  std::unique_ptr<Materialized> m;
  std::unique_ptr<BackwardMaterialized> bm;
  GradResult r;
  Verdict v;
};

Judged judge_reference(const Case& c) {
  Judged j;
  j.m = std::make_unique<Materialized>(c);
  j.bm = std::make_unique<BackwardMaterialized>(*j.m);
  j.r = make_fast_backward_oracle()->compute(j.m->problem(), j.bm->dout());
  j.bm->set_forward_outputs(j.r);
  j.bm->poison_outputs();
  const afz_backward_kernel& k = reference();
  char error[256] = {};
  EXPECT_EQ(k.run(&k, &j.bm->problem(), error, sizeof error), 0) << error;
  const auto precise = make_escalation_backward_oracle();
  j.v = judge_backward(k, *j.bm, j.r, precise.get());
  return j;
}

double dout_at(const BackwardMaterialized& bm, int b, int h, int i, int x) {
  const afz_tensor& t = bm.dout();
  const int64_t off = b * t.stride[0] + h * t.stride[1] + i * t.stride[2] + x * t.stride[3];
  return load(t.dtype, static_cast<const char*>(t.data) + off * size_of(t.dtype));
}

bool dout_row_zero(const BackwardMaterialized& bm, int b, int h, int i, int dv) {
  for (int x = 0; x < dv; ++x)
    if (dout_at(bm, b, h, i, x) != 0) return false;
  return true;
}

// Runs `check` on each judged case of the class; cpu.bwd.fa2 must pass them all.
template <class Check>
void for_each_case(const char* cls, Check check) {
  const GeneratorDef* g = find_generator(cls);
  ASSERT_NE(g, nullptr) << cls;
  EXPECT_TRUE(g->backward) << cls;
  for (int n = 0; n < kCasesPerClass; ++n) {
    const Case c = generate_with(*g, kSeed, uint64_t(n));
    EXPECT_EQ(c.pass, Pass::Bwd) << cls;
    const Judged j = judge_reference(c);
    EXPECT_EQ(j.v.cls, VerdictClass::Pass) << cls << " case " << n << ": " << j.v.detail << "\n" << write_case(c);
    check(j, c, n);
  }
}

TEST(BackwardClasses, LseExtremeRowsPassAndReachPastTheThreshold) {
  for_each_case("bwd_lse_extreme", [](const Judged& j, const Case& c, int n) {
    double max_abs_lse = 0;
    for (size_t r = 0; r < j.r.lse.size(); ++r)
      if (!j.r.empty[r]) max_abs_lse = std::max(max_abs_lse, std::fabs(j.r.lse[r].hi));
    EXPECT_GT(max_abs_lse, kBwdExtremeLse) << "case " << n << "\n" << write_case(c);
  });
}

// A fully masked row with a nonzero dO: the exact gradient is 0 and the
// reference writes exactly 0 (not merely something within the bound).
TEST(BackwardClasses, MaskedRowsHaveNonzeroDoAndExactlyZeroGradients) {
  for_each_case("bwd_masked_rows", [](const Judged& j, const Case& c, int n) {
    const afz_problem& p = j.m->problem();
    int empty_with_dout = 0;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.seqlens_q[b]; ++i) {
          if (j.r.visible_keys[j.r.row(b, h, i)] != 0 || dout_row_zero(*j.bm, b, h, i, p.head_dim_v)) continue;
          ++empty_with_dout;
          for (int x = 0; x < p.head_dim; ++x) {
            EXPECT_EQ(j.r.dq.value[j.r.row(b, h, i) * p.head_dim + x].hi, 0.0);
            EXPECT_EQ(j.bm->grad_at(BackwardMaterialized::Grad::Q, b, h, i, x), 0.0f) << "case " << n;
          }
        }
    EXPECT_GT(empty_with_dout, 0) << "case " << n << "\n" << write_case(c);
  });
}

TEST(BackwardClasses, DoRowsAreMostlyZero) {
  for_each_case("bwd_do_rows", [](const Judged& j, const Case& c, int n) {
    const afz_problem& p = j.m->problem();
    int rows = 0, zero = 0;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.seqlens_q[b]; ++i) {
          ++rows;
          zero += dout_row_zero(*j.bm, b, h, i, p.head_dim_v);
        }
    EXPECT_GE(2 * zero, rows) << "case " << n << ": " << zero << " of " << rows << " rows zero\n" << write_case(c);
  });
}

TEST(BackwardClasses, GqaGroupsShareKvHeads) {
  for_each_case("bwd_gqa", [](const Judged& j, const Case& c, int n) {
    EXPECT_GT(c.heads_q / c.heads_kv, 1) << "case " << n;
    // Every key some row sees is seen through every head of its group.
    const afz_problem& p = j.m->problem();
    const int group = p.heads_q / p.heads_kv;
    for (int b = 0; b < p.batch; ++b)
      for (int hk = 0; hk < p.heads_kv; ++hk)
        for (int k = 0; k < p.seqlens_k[b]; ++k) EXPECT_EQ(j.r.key_rows[j.r.key(b, hk, k)] % group, 0);
  });
}

// The backward classes are out of the forward default mix (a forward
// campaign's cases do not change) and in the backward one.
TEST(BackwardClasses, OnlyTheBackwardMixHasThem) {
  EXPECT_EQ(GeneratorMix::defaults().describe(),
            "shapes=2,late_max=2,flat=1,magnitude=2,masking=2,values=1,layouts=1,add_mask=1,composed=2");
  const std::string bwd = GeneratorMix::defaults(Pass::Bwd).describe();
  for (const auto* table : {&generator_table(), &backward_generator_table()})
    for (const GeneratorDef& g : *table) {
      EXPECT_NE(bwd.find(std::string(g.name) + "="), std::string::npos) << g.name;
      if (g.backward) {
        EXPECT_EQ(GeneratorMix::defaults().describe().find(g.name), std::string::npos) << g.name;
      }
    }
  std::string error;
  auto named = GeneratorMix::parse("bwd_masked_rows=3,masking=1", &error);
  ASSERT_TRUE(named) << error;
  EXPECT_EQ(named->describe(), "bwd_masked_rows=3,masking=1");
  EXPECT_EQ(GeneratorMix::parse("all", &error, Pass::Bwd)->describe(), bwd);
}

}  // namespace
}  // namespace afz
