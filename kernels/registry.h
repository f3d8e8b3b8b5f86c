// Every kernel under test, whatever its origin, is an afz_kernel: the
// built-in CPU references, the CUDA kernels, adapters, and plugins loaded
// from shared libraries with --kernel-lib.
#pragma once
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz {

struct KernelEntry {
  const afz_kernel* kernel;
  std::string origin;  // "builtin", "mutant", or the library path
};

class KernelRegistry {
 public:
  // The built-in kernels (CPU references, mutants, and GPU kernels where built).
  static KernelRegistry with_builtins();
  void add(const afz_kernel* k, std::string origin);
  void add_all(const afz_kernel* ks, int n, const std::string& origin);
  // Loads a plugin; false with a one-line error on failure.
  bool load_library(const std::string& path, std::string* error);
  const afz_kernel* find(const std::string& name) const;
  const std::vector<KernelEntry>& entries() const { return entries_; }

 private:
  std::vector<KernelEntry> entries_;
};

// Groups of built-in kernels, each defined next to its kernels.
void register_cpu_reference_kernels(KernelRegistry& r);  // kernels/cpu
void register_cpu_mutants(KernelRegistry& r);            // kernels/mutants
void register_gpu_kernels(KernelRegistry& r);            // kernels/cuda (no-op without CUDA)

// Why a kernel declines a problem, from its declared capabilities and then
// its own supports() hook; empty when it takes it.
std::string unsupported_reason(const afz_kernel& k, const afz_problem& p);

}  // namespace afz
