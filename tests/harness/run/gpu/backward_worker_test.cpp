// Backward kernels in the worker process (harness/run/gpu): the request
// carries dO, O, LSE in and dQ, dK, dV out as extra tensors, with the same
// guard margins and poison as the forward.  Exercised with CPU backward
// kernels on the worker's host mirror, so it runs without a GPU.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <string>

#include "harness/case/backward_problem.h"
#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/run/gpu/gpu_run.h"
#include "kernels/registry.h"
#include "tests/harness/case_from_text.h"
#include "oracles/backward_oracle.h"

namespace afz {
namespace {

Case parse(const std::string& body) { return testing::case_from_text(body); }

// Ragged, GQA, a row gap and a zero-length key sequence: every stride path.
const char* const kCase =
    "batch 2\nheads 4 2\nseqlen_q 5 3\nseqlen_k 9 0\nhead_dim 8 8\ndtype bf16\nrow_gap 3\ncausal bottom_right\nseed 11\n";

const afz_backward_kernel& reference() {
  static const KernelRegistry r = KernelRegistry::with_builtins();
  return *r.find_backward("cpu.bwd.fa2");
}

// A backward problem with the oracle's O and LSE in place and poisoned outputs.
struct Prepared {
  Materialized m;
  BackwardMaterialized bm;
  explicit Prepared(const Case& c) : m(c), bm(m) {
    const GradResult r = make_fast_backward_oracle()->compute(*bm.problem().fwd, bm.dout());
    bm.set_forward_outputs(r);
    bm.poison_outputs();
  }
  std::vector<uint8_t> grad_bytes() const {
    std::vector<uint8_t> out;
    const afz_backward_problem& p = bm.problem();
    const afz_problem& f = *p.fwd;
    auto add = [&](const afz_tensor& t, int heads, int seq, int dim) {
      const size_t n = size_t(f.batch) * heads * seq * dim * sizeof(float);
      const auto* b = static_cast<const uint8_t*>(t.data);
      out.insert(out.end(), b, b + n);
    };
    add(p.dq, f.heads_q, f.max_seqlen_q, f.head_dim);
    add(p.dk, f.heads_kv, f.max_seqlen_k, f.head_dim);
    add(p.dv, f.heads_kv, f.max_seqlen_k, f.head_dim_v);
    return out;
  }
};

// A backward kernel with the reference's declarations and a planted run().
struct PlantedBackward {
  afz_backward_kernel k{};
  explicit PlantedBackward(int (*run)(const afz_backward_kernel*, const afz_backward_problem*, char*, size_t)) {
    k = reference();
    k.name = "planted.bwd";
    k.user = const_cast<afz_backward_kernel*>(&reference());
    k.run = run;
    gpu::stop_worker();  // a forked worker must see this kernel at its address
  }
};

int run_reference(const afz_backward_kernel* self, const afz_backward_problem* p, char* e, size_t n) {
  const auto* ref = static_cast<const afz_backward_kernel*>(self->user);
  return ref->run(ref, p, e, n);
}

int write_past_dq(const afz_backward_kernel* self, const afz_backward_problem* p, char* e, size_t n) {
  if (int rc = run_reference(self, p, e, n); rc != 0) return rc;
  const afz_problem& f = *p->fwd;
  const int64_t elems = int64_t(f.batch) * f.heads_q * f.max_seqlen_q * f.head_dim;
  static_cast<float*>(p->dq.data)[elems] = 1.0f;  // one element past dQ's last
  return 0;
}

int segfault(const afz_backward_kernel*, const afz_backward_problem*, char*, size_t) {
  raise(SIGSEGV);
  return 0;
}

TEST(BackwardWorker, GradientsMatchAnInProcessRunBitForBit) {
  gpu::stop_worker();
  const Case c = parse(kCase);
  Prepared here(c), there(c);
  char error[256] = {};
  ASSERT_EQ(reference().run(&reference(), &here.bm.problem(), error, sizeof error), 0) << error;
  const gpu::WorkerRun w = gpu::run_backward_in_worker(reference(), there.bm.problem(), 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_EQ(w.out_of_bounds, "");
  EXPECT_EQ(here.grad_bytes(), there.grad_bytes());
  std::string where;
  EXPECT_TRUE(there.bm.padding_untouched(&where)) << where;
}

TEST(BackwardWorker, AWritePastAGradientIsNamed) {
  PlantedBackward planted(&write_past_dq);
  Prepared p(parse(kCase));
  const gpu::WorkerRun w = gpu::run_backward_in_worker(planted.k, p.bm.problem(), 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_NE(w.out_of_bounds.find("dq guard margin written 0 bytes past"), std::string::npos) << w.out_of_bounds;
}

TEST(BackwardWorker, ACrashIsAVerdictAndTheNextCaseRuns) {
  {
    PlantedBackward planted(&segfault);
    Prepared p(parse(kCase));
    const gpu::WorkerRun w = gpu::run_backward_in_worker(planted.k, p.bm.problem(), 30);
    EXPECT_EQ(w.run.status, RunStatus::Crash);
    EXPECT_NE(w.run.message.find("signal"), std::string::npos) << w.run.message;
  }
  Prepared p(parse(kCase));
  const gpu::WorkerRun w = gpu::run_backward_in_worker(reference(), p.bm.problem(), 30);
  EXPECT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
}

}  // namespace
}  // namespace afz
