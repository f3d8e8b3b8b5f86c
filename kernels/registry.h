// Every kernel under test, whatever its origin, is an afz_kernel: the
// built-in CPU references, the CUDA kernels, adapters, and plugins loaded
// from shared libraries with --kernel-lib.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

struct KernelEntry {
  const afz_kernel* kernel;
  std::string origin;  // "builtin", "mutant", "faulty" (test-only), or the library spec (path[#config])
  std::string version; // the library under test as found at load time, "" for our own kernels
};

// Origins compiled into attnfuzz itself; anything else is a plugin path that
// a repro command must load again with --kernel-lib.
inline bool is_builtin_origin(const std::string& origin) {
  return origin.empty() || origin == "builtin" || origin == "mutant" || origin == "faulty";
}
// `--kernel all`: the kernels under test, not the planted-defect ones.
inline bool in_all_kernels(const std::string& origin) { return origin != "mutant" && origin != "faulty"; }

// A --kernel-lib spec as (library path, configuration); see load_library.
std::pair<std::string, std::string> split_library_spec(const std::string& spec);

// A backward kernel (afz_backward_kernel: dQ, dK, dV from dO), with the
// same origins as the forward kernels.  A forward and a backward kernel may
// share a name: `--pass both` pairs them by it.
struct BackwardKernelEntry {
  const afz_backward_kernel* kernel;
  std::string origin;
  std::string version;
};

class KernelRegistry {
 public:
  // The built-in kernels (CPU references, mutants, and GPU kernels where built).
  static KernelRegistry with_builtins();
  void add(const afz_kernel* k, std::string origin, std::string version = "");
  void add_all(const afz_kernel* ks, int n, const std::string& origin, const std::string& version = "");
  void add_backward(const afz_backward_kernel* k, std::string origin, std::string version = "");
  // Loads a plugin from `path` or `path#config` (the text after the '#' that
  // follows the library's file name goes to the plugin's attnfuzz_configure):
  // its attnfuzz_kernels, its attnfuzz_backward_kernels, or both; false with
  // a one-line error.
  bool load_library(const std::string& spec, std::string* error);
  const afz_kernel* find(const std::string& name) const;
  const KernelEntry* entry(const std::string& name) const;
  const std::vector<KernelEntry>& entries() const { return entries_; }
  const afz_backward_kernel* find_backward(const std::string& name) const;
  const BackwardKernelEntry* backward_entry(const std::string& name) const;
  const std::vector<BackwardKernelEntry>& backward_entries() const { return backward_entries_; }

 private:
  std::vector<KernelEntry> entries_;
  std::vector<BackwardKernelEntry> backward_entries_;
};

// Groups of built-in kernels, each defined next to its kernels.
void register_cpu_reference_kernels(KernelRegistry& r);  // kernels/cpu
void register_cpu_mutants(KernelRegistry& r);            // kernels/mutants
void register_gpu_kernels(KernelRegistry& r);            // kernels/cuda (no-op without CUDA)
void register_cudnn_kernels(KernelRegistry& r);          // kernels/cudnn (no-op without CUDA)

// The origin a kernel was registered with, by address, across every registry
// of this process ("" when none registered it: a test's own kernel).  The GPU
// worker needs it to load a plugin the way the harness did, `#config` included.
std::string registered_origin(const afz_kernel* k);
std::string registered_origin(const afz_backward_kernel* k);

// The split of k's time its library keeps (attnfuzz_kernel_timing), if any.
std::optional<afz_kernel_timing> library_kernel_timing(const afz_kernel& k);

// Why a kernel declines a problem, from its declared capabilities and then
// its own supports() hook; empty when it takes it.
std::string unsupported_reason(const afz_kernel& k, const afz_problem& p);

}  // namespace afz
