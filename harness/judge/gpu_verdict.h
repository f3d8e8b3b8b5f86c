// The verdict on the GPU (issue 15): judge() with the per-element bound and
// comparison run on the device (verdict_steps.h compiled by nvcc), and only
// the summary, the undecided rows and the rows that hold the detail line and
// the worst element coming back (verdict_summary.h).  The kernel's O and LSE
// go up once, as do the oracle's arrays.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "harness/judge/verdict_summary.h"

namespace afz {

// A RowJudge on the device with k's outputs in m and r's arrays uploaded;
// nullptr with *why where this build has no CUDA or no device is found.
// Throws std::runtime_error on CUDA errors.
std::unique_ptr<RowJudge> make_gpu_row_judge(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                             std::string* why);

// judge() on the GPU; std::nullopt with *why (one line) where there is no
// device, or a CUDA error stopped it: the caller judges on the CPU instead.
std::optional<Verdict> judge_on_gpu(const afz_kernel& k, const Materialized& m, OracleResult& r,
                                    const Oracle* escalate, const RowSampling& sampling, std::string* why);

}  // namespace afz
