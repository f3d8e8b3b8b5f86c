#include "harness/run/backward_runner.h"

#include <chrono>
#include <stdexcept>
#include <string_view>

#include "harness/case/backward_problem.h"
#include "harness/case/case_io.h"
#include "harness/case/generators.h"
#include "harness/case/tensor_dump.h"
#include "harness/judge/backward_verdict.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/run/isolate.h"
#include "kernels/cpu/backward_kernels.h"
#include "kernels/registry.h"

namespace afz {

namespace {

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// dQ, dK, dV as bytes: fp32, dense [b][h][s][d] (backward_problem.h), so
// batch * stride[0] elements each, padding included (its poison must
// survive both runs alike).
std::vector<uint8_t> gradient_bytes(const afz_backward_problem& p) {
  std::vector<uint8_t> out;
  for (const afz_tensor* t : {&p.dq, &p.dk, &p.dv}) {
    const auto* first = static_cast<const uint8_t*>(t->data);
    out.insert(out.end(), first, first + size_t(p.fwd->batch) * size_t(t->stride[0]) * sizeof(float));
  }
  return out;
}

}  // namespace

std::string failing_gradient(const Verdict& v) {
  for (std::string_view g : kGradientNames)
    if (v.detail.size() > g.size() && v.detail.starts_with(g) && (v.detail[g.size()] == '[' || v.detail[g.size()] == ' '))
      return std::string(g);
  return v.worst.valid ? v.worst.tensor : "";
}

BackwardOutcome run_backward_case(const afz_backward_kernel& k, const Case& c, const BackwardOracle& oracle,
                                  const BackwardOracle* escalate, bool rerun, double timeout_s,
                                  const std::string& dump_dir) {
  BackwardOutcome out;
  const Stopwatch generate;
  Materialized m(c);
  BackwardMaterialized bm(m);
  out.timing.generate = generate.seconds();
  // Caps decide support exactly as for a forward kernel with the same caps.
  afz_kernel as_forward{};
  as_forward.name = k.name;
  as_forward.caps = k.caps;
  if (std::string why = unsupported_reason(as_forward, m.problem()); !why.empty()) {
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = why;
    return out;
  }
  char reason[256] = {};
  if (k.supports && k.supports(&k, &bm.problem(), reason, sizeof reason) != 0) {
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = reason;
    return out;
  }
  // As for a forward GPU kernel: no device here is `unsupported`, before
  // the oracle's work.
  if (k.caps.flags & AFZ_CAP_GPU) {
    if (std::string no_gpu = gpu::gpu_unavailable_reason(); !no_gpu.empty()) {
      out.verdict.cls = VerdictClass::Unsupported;
      out.verdict.detail = no_gpu;
      return out;
    }
  }
  GradResult r;
  const Stopwatch oracle_time;
  try {
    r = oracle.compute(*bm.problem().fwd, bm.dout());
  } catch (const std::invalid_argument& e) {
    throw NoExactGradients(std::string("backward oracle: ") + e.what());
  }
  out.timing.oracle = oracle_time.seconds();
  out.oracle = oracle.name();
  bm.set_forward_outputs(r);
  bm.poison_outputs();
  // GPU kernels run in the worker process on a guarded device mirror (a
  // fault or hang there is a verdict); CPU kernels run here.
  std::string out_of_bounds;
  auto run_once = [&]() {
    const Stopwatch kernel_time;
    KernelRun run;
    if (k.caps.flags & AFZ_CAP_GPU) {
      gpu::WorkerRun w = gpu::run_backward_in_worker(k, bm.problem(), timeout_s);
      run = w.run;
      if (out_of_bounds.empty()) out_of_bounds = w.out_of_bounds;
    } else {
      char error[512] = {};
      const int rc = k.run(&k, &bm.problem(), error, sizeof error);
      run.status = rc == 0                     ? RunStatus::Ok
                   : rc == AFZ_RUN_UNSUPPORTED ? RunStatus::Unsupported
                   : rc == AFZ_RUN_HANG        ? RunStatus::Hang
                                               : RunStatus::Error;
      run.message = error;
    }
    out.timing.kernel += kernel_time.seconds();
    return run;
  };
  const KernelRun run = run_once();
  if (!dump_dir.empty()) dump_backward_tensors(dump_dir, bm, r, run.status == RunStatus::Ok);
  switch (run.status) {
    case RunStatus::Ok: break;
    case RunStatus::Unsupported:
      out.verdict.cls = VerdictClass::Unsupported;
      out.verdict.detail = run.message.empty() ? "the library refused the problem (no reason given)" : run.message;
      return out;
    case RunStatus::Hang:
      out.verdict.cls = VerdictClass::Hang;
      out.verdict.detail = run.message.empty() ? "the kernel's own watchdog gave up (no reason given)" : run.message;
      return out;
    case RunStatus::Error:
    case RunStatus::Crash:
      out.verdict.cls = VerdictClass::Crash;
      out.verdict.detail = std::string("kernel error: ") + run.message;
      return out;
  }
  const Stopwatch judge_time;
  out.verdict = judge_backward(k, bm, r, escalate);
  out.timing.judge = judge_time.seconds();
  if (out.verdict.escalated_rows) out.oracle = escalate->name();
  if (!out_of_bounds.empty() && int(out.verdict.cls) < int(VerdictClass::OutOfBounds)) {
    out.verdict.cls = VerdictClass::OutOfBounds;
    out.verdict.detail = out_of_bounds;
    return out;
  }
  if (!rerun || (k.caps.flags & AFZ_CAP_NONDETERMINISTIC) || is_failure(out.verdict.cls)) return out;
  const std::vector<uint8_t> first = gradient_bytes(bm.problem());
  bm.poison_outputs();
  out.reran = true;
  const KernelRun again = run_once();
  if (again.status != RunStatus::Ok) {
    out.verdict.cls = again.status == RunStatus::Hang ? VerdictClass::Hang : VerdictClass::Crash;
    out.verdict.detail = "second run (determinism check): kernel error: " + again.message;
  } else if (!out_of_bounds.empty()) {  // the first run's damage returned above: this is the second's
    out.verdict.cls = VerdictClass::OutOfBounds;
    out.verdict.detail = "second run (determinism check): " + out_of_bounds;
  } else if (gradient_bytes(bm.problem()) != first) {
    out.verdict.cls = VerdictClass::Nondeterministic;
    out.verdict.detail = "a second run on the same inputs gave different dQ, dK, dV bits";
  }
  return out;
}

std::vector<BackwardGateRow> run_backward_gate(uint64_t seed, int64_t budget, const GeneratorMix& mix) {
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  std::vector<BackwardGateRow> rows;
  for (const BackwardMutantInfo& mutant : cpu_backward_mutants()) {
    BackwardGateRow row;
    row.kernel = mutant.kernel.name;
    row.expected_kill = mutant.expected_kill;
    for (int64_t n = 0; n < budget && !row.killed; ++n) {
      const Case c = generate_case(mix, seed, uint64_t(n)).c;
      ++row.cases;
      BackwardOutcome o;
      try {
        o = run_backward_case(mutant.kernel, c, *fast, precise.get());
      } catch (const std::exception&) {
        continue;  // a case the backward cannot be built for (non-finite inputs): no verdict
      }
      if (is_failure(o.verdict.cls)) {
        row.killed = true;
        row.verdict = std::string(verdict_name(o.verdict.cls));
        row.detail = o.verdict.detail;
        row.case_text = write_case(c);
      }
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace afz
