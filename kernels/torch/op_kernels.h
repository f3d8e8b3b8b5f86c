// Kernels built from .ops entries (op_spec.h): each entry checked against its
// operator's schema, then run through the shared flow (problem_run.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"
#include "op_spec.h"

namespace afz::torchk {

class OpKernel;  // the Backend of one entry

struct OpKernelSet {
  OpKernelSet();
  OpKernelSet(OpKernelSet&&) noexcept;
  OpKernelSet& operator=(OpKernelSet&&) noexcept;
  ~OpKernelSet();  // out of line: OpKernel is complete only in op_kernels.cpp
  void absorb(OpKernelSet&& other);  // appends other's kernels (pointers stay valid)
  std::vector<std::unique_ptr<OpKernel>> backends;
  std::vector<afz_kernel> kernels;  // user -> backends[i]
};

// Loads the file's libraries (dlopen, RTLD_GLOBAL: they register operators
// through static initializers) and builds one kernel per entry.  false with
// "file:line: message" when a library fails to load, an operator is missing,
// or a mapping does not fit the schema (unknown argument, wrong type,
// an argument without default left unmapped, a return index out of range).
bool build_op_kernels(const OpsFile& file, OpKernelSet* out, std::string* error);

}  // namespace afz::torchk
