// What the verdict's row steps (verdict_steps.h) read, from the host's
// objects: the kernel's outputs in a Materialized, the oracle's arrays in
// an OracleResult, and the per-row terms ErrorBound::begin_row needs.
#pragma once
#include <cstdint>

#include "harness/case/materialize.h"
#include "harness/judge/bound.h"
#include "harness/judge/verdict_steps.h"
#include "oracles/oracle.h"

namespace afz {

// Views of m's outputs and r's arrays (host pointers, valid while both live).
verdict_steps::Inputs host_inputs(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                  const bound_steps::Model& model);

// The bound's constants for kernel k on problem p (ErrorBound's).
bound_steps::Model bound_model(const afz_kernel& k, const afz_problem& p);

// Row ri's terms for ErrorBound::begin_row.
RowTerms row_terms(const afz_problem& p, const OracleResult& r, int64_t ri);

}  // namespace afz
