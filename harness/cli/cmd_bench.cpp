// `attnfuzz bench validation`: what validating a GPU kernel costs at real
// sizes, phase by phase, beside the kernel's own time (issue 15).
//
// Shapes are FlashAttention's benchmark: bf16, d = dv = 128, 16 heads,
// batch = tokens / N (batch x N = 16K query rows at every N, enough to fill
// an H200), N = 512, 2K, 8K, 16K keys, causal (bottom-right) and not.  Per
// shape:
//   kernel    the kernel's own time (device events), median of --reps runs
//             in the GPU worker after a warm-up;
//   inputs    materializing the case on the CPU;
//   launch    the worker round trip of one validated run: inputs to the
//             device between poisoned guards, the kernel, outputs back,
//             guards checked (kernel time included);
//   oracle    the oracle tier (the GPU's fp64 tier unless --oracle says
//             otherwise) and
//   verdict   judging every element (or --check-rows' sample) against its bound;
//   total     inputs + launch + oracle + verdict: attnfuzz's full validation.
// With --dump DIR each shape's Q, K, V and the kernel's O (dense BHSD bf16,
// raw little-endian) go to DIR/<shape>/ with a manifest, so that
// tests/bench/fa_test_method.py can time FlashAttention's own test method on
// the very same inputs and output (reports/gpu_oracle/ has both tables).
#include <fmt/core.h>
#include <fmt/os.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/run/gpu/gpu_run.h"
#include "kernels/abi/dtype.h"

namespace afz::cli {
namespace {

struct BenchArgs {
  std::string kernel = "gpu.fa2";
  std::vector<int> keys{512, 2048, 8192, 16384};
  int tokens = 16384;  // batch x N, as FlashAttention's benchmark
  int heads = 16;
  int head_dim = 128;
  int reps = 5;
  int validations = 1;
  uint64_t seed = 15;
  std::string dump_dir, csv_path;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Case bench_case(const BenchArgs& a, int n, bool causal) {
  Case c;
  c.batch = std::max(1, a.tokens / n);
  c.heads_q = c.heads_kv = a.heads;
  c.seqlens_q.assign(size_t(c.batch), n);
  c.seqlens_k.assign(size_t(c.batch), n);
  c.head_dim = c.head_dim_v = a.head_dim;
  c.in_dtype = c.out_dtype = AFZ_BF16;
  if (causal) c.has_window = true, c.window_left = -1, c.window_right = 0;
  c.seed = a.seed;
  return c;
}

// One logical [b][h][s][x] tensor of the problem, dense in that order, as
// raw bytes of its dtype (the layout PyTorch's (b, h, s, d) tensors have).
void write_dense(const std::filesystem::path& path, const afz_tensor& t, int batch, int heads, int seq, int dim) {
  const int esz = size_of(t.dtype);
  std::vector<char> row(size_t(dim) * esz);
  std::ofstream f(path, std::ios::binary);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int s = 0; s < seq; ++s) {
        const char* base = static_cast<const char*>(t.data) +
                           (b * t.stride[0] + h * t.stride[1] + s * t.stride[2]) * int64_t(esz);
        for (int x = 0; x < dim; ++x) std::copy_n(base + x * t.stride[3] * esz, esz, row.data() + x * esz);
        f.write(row.data(), std::streamsize(row.size()));
      }
  if (!f) throw BadInput{"bench: cannot write " + path.string()};
}

void dump(const std::filesystem::path& dir, const Materialized& m, bool causal) {
  std::filesystem::create_directories(dir);
  const afz_problem& p = m.problem();
  write_dense(dir / "q.bin", p.q, p.batch, p.heads_q, p.max_seqlen_q, p.head_dim);
  write_dense(dir / "k.bin", p.k, p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim);
  write_dense(dir / "v.bin", p.v, p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim_v);
  write_dense(dir / "o.bin", p.o, p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v);
  std::ofstream(dir / "manifest.txt") << fmt::format(
      "dtype {}\nbatch {}\nheads {}\nseqlen_q {}\nseqlen_k {}\nhead_dim {}\ncausal {}\nscale {:a}\n",
      dtype_name(p.q.dtype), p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k, p.head_dim, causal ? 1 : 0,
      double(p.scale));
}

struct Row {
  int n, batch;
  bool causal;
  double kernel_ms, inputs_s, launch_s, oracle_s, verdict_s;
  std::string verdict;
  int64_t escalated;
  double total() const { return inputs_s + launch_s + oracle_s + verdict_s; }
};

Row measure(const BenchArgs& a, const afz_kernel& k, const Runner& runner, int n, bool causal) {
  const Case c = bench_case(a, n, causal);
  Row row{n, c.batch, causal, 0, 0, 0, 0, 0, "", 0};
  std::vector<double> inputs, launch, oracle, verdict;
  std::unique_ptr<Materialized> m;
  for (int v = 0; v < a.validations; ++v) {
    const auto t0 = Clock::now();
    m = std::make_unique<Materialized>(c);
    inputs.push_back(seconds_since(t0));
    const CaseOutcome out = runner.run(k, *m);
    if (out.verdict.cls == VerdictClass::Unsupported || out.verdict.cls == VerdictClass::Crash ||
        out.verdict.cls == VerdictClass::Hang)
      throw BadInput{fmt::format("bench: {} on N = {}: {}: {}", k.name, n, verdict_name(out.verdict.cls),
                                 out.verdict.detail)};
    launch.push_back(out.timing.kernel);
    oracle.push_back(out.timing.oracle);
    verdict.push_back(out.timing.judge);
    row.verdict = std::string(verdict_name(out.verdict.cls));
    row.escalated = out.verdict.escalated_rows;
  }
  // The kernel's own time, in the same worker, on the same inputs; the
  // first launch pays for module loading and is not counted.
  std::vector<double> kernel;
  for (int r = 0; r <= a.reps; ++r) {
    const gpu::WorkerRun w = gpu::run_in_worker(k, *m, 600);
    if (w.run.status != RunStatus::Ok) throw BadInput{fmt::format("bench: {}: {}", k.name, w.run.message)};
    if (r > 0) kernel.push_back(w.kernel_seconds * 1e3);
  }
  if (!a.dump_dir.empty())
    dump(std::filesystem::path(a.dump_dir) / fmt::format("n{}_{}", n, causal ? "causal" : "full"), *m, causal);
  row.kernel_ms = median(kernel);
  row.inputs_s = median(inputs);
  row.launch_s = median(launch);
  row.oracle_s = median(oracle);
  row.verdict_s = median(verdict);
  return row;
}

}  // namespace

Action add_bench_command(CLI::App& app, Globals& g) {
  auto* bench = app.add_subcommand("bench", "benchmarks that print figures");
  bench->require_subcommand(1);
  auto* sub = bench->add_subcommand(
      "validation", "a GPU kernel's own time beside attnfuzz's full validation, phase by phase, at real sizes");
  auto a = std::make_shared<BenchArgs>();
  sub->add_option("--kernel", a->kernel, "the GPU kernel to validate")->capture_default_str();
  sub->add_option("--keys", a->keys, "sequence lengths N (queries = keys)")->delimiter(',');
  sub->add_option("--tokens", a->tokens, "batch x N of every shape")->capture_default_str();
  sub->add_option("--heads", a->heads, "heads (queries and keys)")->capture_default_str();
  sub->add_option("--head-dim", a->head_dim, "head dimension")->capture_default_str();
  sub->add_option("--reps", a->reps, "kernel launches timed per shape (median)")->capture_default_str();
  sub->add_option("--validations", a->validations, "full validations per shape (median)")->capture_default_str();
  sub->add_option("--seed", a->seed, "the cases' value seed")->capture_default_str();
  sub->add_option("--dump", a->dump_dir, "write each shape's Q, K, V, O (dense bf16) here for fa_test_method.py");
  sub->add_option("--csv", a->csv_path, "also write the table as CSV");
  return [&g, a]() {
    if (a->reps < 1 || a->validations < 1) throw BadInput{"bench: --reps and --validations must be at least 1"};
    const KernelRegistry reg = g.registry();
    const afz_kernel* k = reg.find(a->kernel);
    if (!k) throw BadInput{"bench: unknown kernel '" + a->kernel + "'"};
    if (!(k->caps.flags & AFZ_CAP_GPU)) throw BadInput{"bench: " + a->kernel + " is no GPU kernel"};
    if (std::string why = gpu::gpu_unavailable_reason(); !why.empty()) throw BadInput{"bench: " + why};
    RunOptions o = g.run_options();
    // At these sizes the CPU tiers take minutes per case: the GPU tier is
    // the default here; --oracle fast|boost|mpfr still chooses another.
    if (g.oracle == "auto") o.oracle = OracleTier::Gpu;
    const Runner runner(o);
    fmt::print("attnfuzz bench validation: {} on {}, oracle {}, bf16, d {}, {} heads, batch x N = {}; kernel: median "
               "of {} launches; phases: median of {} validation(s); seconds unless ms\n",
               a->kernel, gpu::gpu_device_name(), runner.oracle_name(), a->head_dim, a->heads, a->tokens, a->reps,
               a->validations);
    constexpr const char* header = "{:>6} {:>6} {:>5} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {}\n";
    fmt::print(fmt::runtime(header), "N", "causal", "batch", "kernel_ms", "inputs", "launch", "oracle", "verdict", "total",
               "total/krn", "escalated", "verdict");
    std::vector<Row> rows;
    for (int n : a->keys)
      for (bool causal : {false, true}) {
        const Row r = measure(*a, *k, runner, n, causal);
        rows.push_back(r);
        fmt::print("{:>6} {:>6} {:>5} {:>10.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.0f} {:>9} {}\n", r.n,
                   r.causal ? "yes" : "no", r.batch, r.kernel_ms, r.inputs_s, r.launch_s, r.oracle_s, r.verdict_s,
                   r.total(), r.total() / (r.kernel_ms * 1e-3), r.escalated, r.verdict);
        std::fflush(stdout);
      }
    if (!a->csv_path.empty()) {
      std::ofstream f(a->csv_path);
      f << "n,causal,batch,heads,head_dim,kernel_ms,inputs_s,launch_s,oracle_s,verdict_s,total_s,escalated,verdict\n";
      for (const Row& r : rows)
        f << fmt::format("{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{},{}\n", r.n, r.causal ? 1 : 0,
                         r.batch, a->heads, a->head_dim, r.kernel_ms, r.inputs_s, r.launch_s, r.oracle_s, r.verdict_s,
                         r.total(), r.escalated, r.verdict);
    }
    const bool all_pass =
        std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.verdict == verdict_name(VerdictClass::Pass); });
    return all_pass ? kExitOk : kExitFailuresFound;
  };
}

}  // namespace afz::cli
