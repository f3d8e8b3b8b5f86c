#include "harness/run/case_budget.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "harness/case/generators.h"
#include "kernels/abi/dtype.h"
#include "oracles/oracle.h"

namespace afz {
namespace {

// Host copies of each tensor a GPU kernel's call makes besides the
// materialized one: the request payload, the frame the worker receives and
// the worker's WireProblem (harness/run/gpu/problem_wire.h).
constexpr int64_t kWorkerCopies = 3;
// The oracle's result per output element: o as a DD and the four condition
// and error terms (OracleResult), twice: the runner's result and, for the
// GPU tier's compute_rows or the verdict's escalation, a second full one.
constexpr int64_t kOracleBytesPerElement = 2 * int64_t(sizeof(DD) + 4 * sizeof(double));
// What materialize.h keeps per input element besides its stored bits: the
// logical value in double.
constexpr int64_t kLogicalBytesPerElement = sizeof(double);
// A case may use this share of the physical memory: the rest is the
// process, the OS and the other jobs of a campaign.
constexpr double kMemoryShare = 0.75;
// cgroup v2's memory limit: a number, or "max" (none).
constexpr const char* kCgroupMemoryMax = "/sys/fs/cgroup/memory.max";
constexpr double kGiB = double(int64_t{1} << 30);

std::string power_of_two(int64_t x) { return fmt::format("2^{:.1f}", std::log2(double(std::max<int64_t>(x, 1)))); }

int64_t query_rows(const Case& c) {
  int64_t rows = 0;
  for (int b = 0; b < c.batch && b < int(c.seqlens_q.size()); ++b) rows += int64_t(c.heads_q) * c.seqlens_q[b];
  return rows;
}

}  // namespace

int64_t largest_tensor(const Case& c) {
  const int64_t b = c.batch, sq = c.max_seqlen_q(), sk = c.max_seqlen_k();
  const int64_t row = int64_t(c.head_dim) + c.row_gap, row_v = int64_t(c.head_dim_v) + c.row_gap;
  return std::max({b * c.heads_q * sq * row, b * c.heads_kv * sk * row, b * c.heads_kv * sk * row_v,
                   b * c.heads_q * sq * row_v});
}

int64_t host_bytes(const Case& c, bool gpu_kernel) {
  const int64_t b = c.batch, sq = c.max_seqlen_q(), sk = c.max_seqlen_k();
  const int64_t in = size_of(c.in_dtype), out = size_of(c.out_dtype);
  const int64_t row = int64_t(c.head_dim) + c.row_gap, row_v = int64_t(c.head_dim_v) + c.row_gap;
  const int64_t inputs = b * c.heads_q * sq * row + b * c.heads_kv * sk * (row + row_v);
  const int64_t outputs = b * c.heads_q * sq * row_v;
  const int64_t copies = 1 + (gpu_kernel ? kWorkerCopies : 0);
  int64_t bytes = inputs * (kLogicalBytesPerElement + in * copies) + outputs * (out * copies + kOracleBytesPerElement);
  const int64_t mask = b * sq * sk;
  if (c.bool_mask) bytes += mask * copies;                        // one byte per (i, j)
  if (c.add_mask) bytes += mask * int64_t(sizeof(float)) * copies;  // fp32 per (i, j)
  return bytes;
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? int64_t(pages) * page : 0;
  // A container's limit (cgroup v2) is what the kernel enforces, not the host's RAM.
  std::ifstream limit(kCgroupMemoryMax);
  int64_t cgroup = 0;
  if (limit >> cgroup && cgroup > 0) bytes = bytes > 0 ? std::min(bytes, cgroup) : cgroup;
  return bytes;
}

int64_t cpu_oracle_work(const Case& c, const RowSampling& sampling) {
  const int64_t work = case_work(c);
  if (!sampling.active()) return work;
  int64_t edges = 0;
  for (int b = 0; b < c.batch && b < int(c.seqlens_q.size()); ++b)
    edges += int64_t(c.heads_q) * sequence_edge_rows(c.seqlens_q[b], sampling.tile_rows);
  const int64_t checked = std::min(query_rows(c), std::max(sampling.max_rows, edges));
  const int64_t longest_row = int64_t(c.max_seqlen_k()) * (c.head_dim + c.head_dim_v);
  return std::min(work, checked * longest_row);
}

std::string budget_reason(const afz_kernel& k, const Case& c, const BudgetQuery& q) {
  const bool gpu_kernel = (k.caps.flags & AFZ_CAP_GPU) != 0;
  const int64_t work = case_work(c);
  if (!gpu_kernel && work > kHostWorkLimit)
    return fmt::format("{} multiply-adds, past the {} a host kernel is given per case (a GPU kernel's case)",
                       power_of_two(work), power_of_two(kHostWorkLimit));
  if (const int64_t elements = largest_tensor(c); !gpu_kernel && elements > kHostTensorLimit)
    return fmt::format("a tensor of {} elements, past the {} a host kernel is given per tensor (a GPU kernel's case)",
                       elements, kHostTensorLimit);
  if (q.backward && work > kHostWorkLimit)
    return fmt::format("{} multiply-adds, past the {} the CPU backward oracle is given per case",
                       power_of_two(work), power_of_two(kHostWorkLimit));
  if (!q.backward && !q.gpu_oracle) {
    const int64_t oracle = cpu_oracle_work(c, q.sampling);
    if (oracle > kHostWorkLimit)
      return fmt::format("the CPU oracle would spend {} multiply-adds, past its {} per case (--oracle gpu takes it)",
                         power_of_two(oracle), power_of_two(kHostWorkLimit));
  }
  if (q.memory_bytes > 0) {
    const int64_t need = host_bytes(c, gpu_kernel);
    if (double(need) > kMemoryShare * double(q.memory_bytes))
      return fmt::format("needs about {:.1f} GiB of host memory for its inputs and results; this machine has {:.1f} GiB",
                         double(need) / kGiB, double(q.memory_bytes) / kGiB);
  }
  return "";
}

}  // namespace afz
