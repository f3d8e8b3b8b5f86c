#include "harness/run/runner.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "harness/case/generators.h"
#include "harness/judge/gpu_verdict.h"
#include "harness/run/case_budget.h"
#include "harness/run/gpu/gpu_run.h"
#include "kernels/registry.h"

namespace afz {
namespace {

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

CaseOutcome unsupported(const std::string& why) {
  CaseOutcome out;
  out.verdict.cls = VerdictClass::Unsupported;
  out.verdict.detail = why;
  return out;
}

Verdict status_verdict(const KernelRun& run) {
  Verdict v;
  switch (run.status) {
    case RunStatus::Hang: v.cls = VerdictClass::Hang; break;
    case RunStatus::Unsupported: v.cls = VerdictClass::Unsupported; break;
    default: v.cls = VerdictClass::Crash; break;
  }
  v.detail = run.message;
  return v;
}

// GPU kernels always run in the worker process (harness/run/gpu/gpu_run.h),
// whose guarded device mirror also reports out-of-bounds writes.
// The ABI's promise: a kernel without AFZ_CAP_LSE gets lse = NULL (a buffer
// it was never asked to fill must not make an adapter demand an LSE from the
// library it wraps); the materialized LSE buffer stays poisoned and unjudged.
class LseHidden {
 public:
  LseHidden(afz_problem& p, bool hide) : p_(p), saved_(p.lse) {
    if (hide) p_.lse = nullptr;
  }
  ~LseHidden() { p_.lse = saved_; }

 private:
  afz_problem& p_;
  float* saved_;
};

KernelRun execute(const afz_kernel& k, Materialized& m, const RunOptions& o, std::string* out_of_bounds) {
  const LseHidden hidden(m.problem(), !(k.caps.flags & AFZ_CAP_LSE));
  if (!(k.caps.flags & AFZ_CAP_GPU)) return run_kernel(k, m, o.isolate, o.timeout_s);
  gpu::WorkerRun w = gpu::run_in_worker(k, m, o.timeout_s);
  if (out_of_bounds->empty()) *out_of_bounds = w.out_of_bounds;
  return w.run;
}

// judge(), on the GPU where the oracle tier is (gpu_verdict.h: the same
// Verdict without the CPU's pass over every element), falling back to the
// CPU with a one-line note on a device error.
Verdict verdict(const afz_kernel& k, const Materialized& m, OracleResult& r, const RunOptions& o,
                const Oracle* escalate) {
  if (o.oracle == OracleTier::Gpu) {
    std::string why;
    if (std::optional<Verdict> v = judge_on_gpu(k, m, r, escalate, o.sampling, &why)) return *v;
    static std::atomic<bool> noted{false};
    if (!noted.exchange(true)) std::fprintf(stderr, "attnfuzz: judging on the CPU instead of the GPU: %s\n", why.c_str());
  }
  return judge(k, m, r, escalate, o.sampling);
}

}  // namespace

std::optional<OracleTier> parse_oracle_tier(std::string_view s) {
  if (s == "auto") return OracleTier::Auto;
  if (s == "fast") return OracleTier::Fast;
  if (s == "gpu") return OracleTier::Gpu;
  if (s == "boost") return OracleTier::Boost;
  if (s == "mpfr") return OracleTier::Mpfr;
  return std::nullopt;
}

Runner::Runner(RunOptions options) : options_(options) {
  auto precise = [&]() -> std::unique_ptr<Oracle> {
    if (auto m = make_mpfr_oracle(options_.mpfr_bits)) return m;
    return make_boost_oracle();
  };
  switch (options_.oracle) {
    case OracleTier::Fast: primary_ = make_fast_oracle(); break;
    case OracleTier::Boost: primary_ = make_boost_oracle(); break;
    case OracleTier::Mpfr:
      primary_ = make_mpfr_oracle(options_.mpfr_bits);
      if (!primary_) throw std::runtime_error("oracle: MPFR was not built here (no MPFR headers); use boost or auto");
      break;
    case OracleTier::Auto:
      primary_ = make_fast_oracle();
      escalation_ = precise();
      break;
    case OracleTier::Gpu: {
      // The fast tier's bound, so its undecided rows escalate as auto's do.
      std::string why;
      primary_ = make_gpu_oracle(&why);
      if (!primary_) throw std::runtime_error("oracle: no GPU tier here (" + why + "); use auto");
      escalation_ = precise();
      break;
    }
  }
}

std::string Runner::oracle_name() const {
  return escalation_ ? primary_->name() + "+" + escalation_->name() : primary_->name();
}

OracleResult Runner::reference(const Materialized& m) const {
  const afz_problem& p = m.problem();
  if (!options_.sampling.active()) return primary_->compute(p);  // every row: no row list to build
  RowCoverage coverage;
  const std::vector<int64_t> rows = checked_rows(p, options_.sampling, &coverage);
  if (!coverage.sampled) return primary_->compute(p);
  // Only the rows the verdict will judge: the others stay empty and unread.
  OracleResult r;
  r.resize(p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v);
  primary_->compute_rows(p, rows, r);
  return r;
}

std::string Runner::declined_before_inputs(const afz_kernel& k, const Case& c, bool backward) const {
  BudgetQuery q;
  q.gpu_oracle = options_.oracle == OracleTier::Gpu;
  q.backward = backward;
  q.sampling = options_.sampling;
  static const int64_t memory = physical_memory_bytes();  // one machine, one process: read once
  q.memory_bytes = memory;
  if (std::string why = budget_reason(k, c, q); !why.empty()) return why;
  // Only a case no host could take asks for the device this early: smaller
  // cases keep their capability reasons first (run() checks the device).
  if ((k.caps.flags & AFZ_CAP_GPU) && case_work(c) > kHostWorkLimit) return gpu::gpu_unavailable_reason();
  return "";
}

bool Runner::reruns(const afz_kernel& k, bool rerun) const {
  // A kernel that declares its reruns may differ (atomics) is not held to
  // identical bits; every other kernel is, when determinism is checked.
  return (rerun || options_.check_determinism) && !(k.caps.flags & AFZ_CAP_NONDETERMINISTIC);
}

CaseOutcome Runner::run(const afz_kernel& k, Materialized& m, OracleResult* r, bool rerun_requested) const {
  if (std::string why = declined_before_inputs(k, m.spec()); !why.empty()) return unsupported(why);
  if (std::string why = unsupported_reason(k, m.problem()); !why.empty()) return unsupported(why);
  if (k.caps.flags & AFZ_CAP_GPU)
    if (std::string no_gpu = gpu::gpu_unavailable_reason(); !no_gpu.empty()) return unsupported(no_gpu);
  CaseOutcome out;
  m.poison_outputs();
  std::string out_of_bounds;
  KernelRun run = execute(k, m, options_, &out_of_bounds);
  out.timing.kernel = run.seconds;
  if (run.status != RunStatus::Ok) {
    out.verdict = status_verdict(run);
    return out;
  }
  const bool rerun = reruns(k, rerun_requested);
  std::vector<uint8_t> first;
  if (rerun) first = m.output_bytes();
  OracleResult local;
  if (!r) {
    Stopwatch sw;
    local = reference(m);
    r = &local;
    out.timing.oracle = sw.seconds();
  }
  Stopwatch judge_time;
  out.verdict = verdict(k, m, *r, options_, escalation_.get());
  out.timing.judge = judge_time.seconds();
  if (!out_of_bounds.empty() && int(out.verdict.cls) < int(VerdictClass::OutOfBounds)) {
    out.verdict.cls = VerdictClass::OutOfBounds;
    out.verdict.detail = out_of_bounds;
  }
  if (rerun && !is_failure(out.verdict.cls)) {
    m.poison_outputs();
    out.reran = true;
    KernelRun again = execute(k, m, options_, &out_of_bounds);
    out.timing.kernel += again.seconds;
    if (again.status != RunStatus::Ok) {
      out.verdict = status_verdict(again);
    } else if (m.output_bytes() != first) {
      out.verdict.cls = VerdictClass::Nondeterministic;
      out.verdict.detail = "a second run on the same inputs gave different output bits";
    }
  }
  return out;
}

CaseOutcome Runner::run(const afz_kernel& k, const Case& c, bool rerun) const {
  // Declined from the case alone: a huge case's inputs are never built.
  if (std::string why = declined_before_inputs(k, c); !why.empty()) return unsupported(why);
  Stopwatch sw;
  Materialized m(c);
  const double gen = sw.seconds();
  CaseOutcome out = run(k, m, nullptr, rerun);
  out.timing.generate = gen;
  return out;
}

}  // namespace afz
