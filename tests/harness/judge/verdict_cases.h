// What the split verdict's tests share (verdict_summary_test.cpp on the
// CPU, tests/harness/judge/gpu/gpu_verdict_test.cpp on the GPU): the same
// Verdict field by field, bit for bit, and the generated cases with every
// CPU kernel and mutant plus planted defects, each judged twice.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <span>
#include <string>

#include "harness/case/generators.h"
#include "harness/case/materialize.h"
#include "harness/judge/verdict.h"
#include "harness/judge/verdict_compare.h"
#include "harness/run/isolate.h"
#include "kernels/abi/dtype.h"
#include "kernels/registry.h"
#include "oracles/oracle.h"

namespace afz::testing {

// `got` is judge()'s `want` in every field.
inline void expect_same_verdict(const Verdict& got, const Verdict& want, const std::string& what) {
  EXPECT_EQ(verdict_difference(got, want), "") << what;
}

// judge() and the verdict under test, each on its own copy of r (escalation
// rewrites rows; `loosen`: a third of them forced to escalate), agree in
// every field.  *escalated counts the verdicts that escalated rows.
using VerdictUnderTest = std::function<Verdict(const afz_kernel&, const Materialized&, OracleResult&, const Oracle*,
                                               const RowSampling&)>;
inline void expect_equals_judge(const VerdictUnderTest& under_test, const afz_kernel& k, const Materialized& m,
                                const OracleResult& r, const Oracle* escalate, const RowSampling& sampling,
                                bool loosen_rows, const std::string& what, int* escalated);

// Defects planted after a kernel ran, so that every class and path shows up
// whatever the kernel: none, an element left unwritten, a NaN, an LSE in
// log2, a poisoned LSE.
enum class Plant { None, Unwritten, NaN, Log2Lse, LseUnwritten };
inline constexpr Plant kPlants[] = {Plant::None, Plant::Unwritten, Plant::NaN, Plant::Log2Lse, Plant::LseUnwritten};

// On the last query row of the first sequence, element x = dv / 2.
inline void plant(Materialized& m, Plant what) {
  afz_problem& p = m.problem();
  const int i = p.seqlens_q[0] - 1, x = p.head_dim_v / 2, h = p.heads_q - 1;
  if (i < 0) return;
  auto* at = static_cast<uint8_t*>(p.o.data) +
             (h * p.o.stride[1] + i * p.o.stride[2] + x * p.o.stride[3]) * size_of(p.o.dtype);
  float* lse = p.lse ? &p.lse[h * p.lse_stride[1] + i * p.lse_stride[2]] : nullptr;
  switch (what) {
    case Plant::None: break;
    case Plant::Unwritten: store_bits(p.o.dtype, at, output_poison_bits(p.o.dtype)); break;
    case Plant::NaN: store_bits(p.o.dtype, at, quiet_nan_bits(p.o.dtype)); break;
    case Plant::Log2Lse:
      if (lse && std::isfinite(*lse)) *lse = float(double(*lse) * 0x1.71547652b82fep0);
      break;
    case Plant::LseUnwritten:
      if (lse) *lse = float_of(kPoisonF32);
      break;
  }
}

// Every kEscalateEvery-th row gets an infinite fast-tier bound on its first
// element, so the row is undecided and escalates (an open bound, as a fast
// tier gives near a cancellation, without having to find one).
inline constexpr int64_t kEscalateEvery = 3;
inline void loosen(OracleResult& r) {
  for (int64_t ri = 0; ri < r.rows(); ri += kEscalateEvery)
    if (!r.o_err.empty()) r.o_err[ri * r.dv] = std::numeric_limits<double>::infinity();
}

// Forced escalation sends a third of the rows to MPFR for every kernel:
// small cases and two plants (none, and a NaN among escalated rows' peers).
inline constexpr int64_t kEscalationMaxWork = int64_t(1) << 14;
inline constexpr Plant kEscalationPlants[] = {Plant::None, Plant::NaN};
// A few rows of each case: edges at tiles of 4, and a seeded sample; the
// escalation tier is set up per case whatever the number of rows, so the
// cases stay small.
inline constexpr int64_t kSampledMaxWork = int64_t(1) << 17;
inline constexpr RowSampling kSampling{5, 4, 7};

inline void expect_equals_judge(const VerdictUnderTest& under_test, const afz_kernel& k, const Materialized& m,
                                const OracleResult& r, const Oracle* escalate, const RowSampling& sampling,
                                bool loosen_rows, const std::string& what, int* escalated) {
  OracleResult want_r = r, got_r = r;
  if (loosen_rows) loosen(want_r), loosen(got_r);
  const Verdict want = judge(k, m, want_r, escalate, sampling);
  const Verdict got = under_test(k, m, got_r, escalate, sampling);
  expect_same_verdict(got, want, what);
  *escalated += got.escalated_rows > 0;
}

// A case whose rows tie: q = 0 makes every score 0, so every query row of
// a (b, h) sees the same keys with the same weights and a kernel gives each
// the same output and the same error / bound.  The worst element and the
// detail line must then be the first row's (judge()'s order).
inline Case tied_rows_case() {
  Case c;
  c.batch = 2;
  c.heads_q = c.heads_kv = 2;
  c.seqlens_q = {9, 5};
  c.seqlens_k = {40, 7};
  c.head_dim = c.head_dim_v = 16;
  c.in_dtype = c.out_dtype = AFZ_BF16;
  c.values_q = {"few_rows", 0};  // every row dropped: zeros
  c.seed = 3;
  return c;
}

// Each CPU kernel and mutant on the tied case: check(kernel, m, r, name),
// and how many of them put a nonzero worst element in the first row (so
// that ties were there to break).
inline int tied_rows_at_first_row(const std::function<void(const afz_kernel&, const Materialized&, const OracleResult&,
                                                           const std::string&)>& check) {
  const auto fast = make_fast_oracle();
  Materialized m(tied_rows_case());
  const OracleResult r = fast->compute(m.problem());
  int first = 0;
  const KernelRegistry reg = KernelRegistry::with_builtins();
  for (const KernelEntry& e : reg.entries()) {
    if ((e.kernel->caps.flags & AFZ_CAP_GPU) || e.origin == "faulty") continue;
    m.poison_outputs();
    if (run_kernel(*e.kernel, m, false, 60).status != RunStatus::Ok) continue;
    check(*e.kernel, m, r, e.kernel->name);
    OracleResult copy = r;
    const Verdict v = judge(*e.kernel, m, copy, nullptr);
    first += v.worst.valid && v.worst.over_bound > 0 && v.worst.i == 0;
  }
  return first;
}

// For each generated case (up to `max_work`) the oracle `primary` can
// compute, each CPU kernel and mutant, and each of `plants`: calls check(kernel,
// m, r, what) with m holding the outputs.  Returns the number of calls.
inline int for_each_judged_case(const Oracle& primary, uint64_t seed, int cases, int64_t max_work,
                                std::span<const Plant> plants, const std::function<void(const afz_kernel&, const Materialized&,
                                                         const OracleResult&, const std::string&)>& check) {
  const KernelRegistry reg = KernelRegistry::with_builtins();
  const GeneratorMix mix = GeneratorMix::defaults();
  int judged = 0;
  for (int n = 0; n < cases; ++n) {
    const GeneratedCase gc = generate_case(mix, seed, uint64_t(n));
    if (case_work(gc.c) > max_work) continue;
    Materialized m(gc.c);
    OracleResult r;
    try {
      r = primary.compute(m.problem());
    } catch (const std::invalid_argument&) {
      continue;  // non-finite inputs on a visible path: nothing to judge
    }
    for (const KernelEntry& e : reg.entries()) {
      if ((e.kernel->caps.flags & AFZ_CAP_GPU) || e.origin == "faulty") continue;
      if (!unsupported_reason(*e.kernel, m.problem()).empty()) continue;
      for (Plant pl : plants) {
        m.poison_outputs();
        // The ABI's promise (runner.cpp): no LSE buffer for a kernel without AFZ_CAP_LSE.
        float* lse = m.problem().lse;
        if (!(e.kernel->caps.flags & AFZ_CAP_LSE)) m.problem().lse = nullptr;
        const KernelRun run = run_kernel(*e.kernel, m, false, 60);
        m.problem().lse = lse;
        if (run.status != RunStatus::Ok) break;
        plant(m, pl);
        check(*e.kernel, m, r,
              std::string(e.kernel->name) + " on " + gc.generator->name + " case " + std::to_string(n) + " plant " +
                  std::to_string(int(pl)));
        ++judged;
      }
    }
  }
  return judged;
}

}  // namespace afz::testing
