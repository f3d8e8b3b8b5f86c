// Declining a case before its inputs are built: what a host kernel, the CPU
// oracle tiers and this machine's memory afford per case.  The scale class
// (harness/case/scale_generator.h) holds cases of 2^40 multiply-adds and
// tensors of 2^31 elements: a CPU kernel or the CPU oracle would spend
// hours on one, and materializing a huge K/V batch takes tens of GiB of
// host memory.  Such a case is `unsupported` for that kernel, with a one-
// line reason, and no input is built for it unless some kernel takes it.
#pragma once
#include <cstdint>
#include <string>

#include "harness/case/case.h"
#include "harness/judge/row_sample.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

// Multiply-adds (generators.h case_work) one host computation is given per
// case: a kernel without AFZ_CAP_GPU, or a CPU oracle tier over the rows it
// checks.  2^36 is issue 15's 16 heads x 4096^2 x d = 128 case, which the
// fast tier took 94 s for on one core; every default class stays below 2^23.
inline constexpr int64_t kHostWorkLimit = int64_t{1} << 36;
// Elements of one tensor a host kernel is given: past 2^31 a flat int32
// offset wraps, which is what the scale class's huge K/V cases are for in
// GPU kernels; the host reference kernels are not (and those inputs take
// minutes and tens of GiB to build).
inline constexpr int64_t kHostTensorLimit = int64_t{1} << 31;

// Where the case will be judged: decides which budgets apply.
struct BudgetQuery {
  bool gpu_oracle = false;  // --oracle gpu: the forward reference is computed on the device
  bool backward = false;    // a backward slot: its oracles are CPU tiers, whatever --oracle says
  RowSampling sampling;     // --check-rows: the CPU oracle computes only the checked rows
  int64_t memory_bytes = 0; // host memory available (physical_memory_bytes()); 0: not checked
};

// Host bytes a case takes while it runs: the materialized inputs (a double
// and a stored element per input element), the output, the oracle's result,
// and for a GPU kernel the worker's copies of every tensor (the request, its
// receipt, the worker's problem).  An estimate of today's layout
// (harness/case/materialize.h, oracles/oracle.h, harness/run/gpu), kept on
// the high side.
int64_t host_bytes(const Case& c, bool gpu_kernel);
// Elements of the case's largest Q, K, V or O tensor (rows padded by row_gap).
int64_t largest_tensor(const Case& c);
// This machine's physical memory in bytes (0 if unknown).
int64_t physical_memory_bytes();
// Multiply-adds the CPU oracle spends on c: case_work, or with row sampling
// at most the checked rows (edges and sample) times the longest row.
int64_t cpu_oracle_work(const Case& c, const RowSampling& sampling);

// "" when kernel k (its caps) can be given c within the budgets of q; else
// a one-line reason, the first of: a host kernel past kHostWorkLimit or
// kHostTensorLimit, a backward slot past kHostWorkLimit, the
// CPU oracle past it (with what would take it: --oracle gpu, --check-rows),
// host memory short of host_bytes.
std::string budget_reason(const afz_kernel& k, const Case& c, const BudgetQuery& q);

}  // namespace afz
