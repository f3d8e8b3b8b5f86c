// The exported symbols of libattnfuzz_torch.so (kernels/abi/attnfuzz_kernel.h):
//
//   attnfuzz_abi_version       the ABI these adapters were compiled against
//   attnfuzz_configure         "ops=FILE[;ops=FILE...]": kernels from .ops files
//   attnfuzz_kernels           the five built-in backends, then the .ops kernels
//   attnfuzz_backward_kernels  the backward operators of all five (backward_kernels.h)
//   attnfuzz_library_version   "PyTorch 2.11.0, CUDA 13.0, cuDNN 91900"
//
// Everything else has hidden visibility (CMakeLists.txt), so two plugins, or
// a plugin and attnfuzz, never bind each other's symbols.
#include <algorithm>
#include <deque>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"
#include "backward_kernels.h"
#include "builtin_kernels.h"
#include "messages.h"
#include "op_kernels.h"
#include "op_spec.h"
#include "torch_cuda.h"

#define AFZ_EXPORT extern "C" __attribute__((visibility("default")))

namespace afz::torchk {
namespace {

// The kernels handed out by attnfuzz_kernels.  A registry keeps pointers
// into the array it got, so a later configure (the library loaded again
// with another config in the same process) appends a new table and leaves
// the old ones alone: a deque never moves its elements.
//
// The arrays themselves live in this library's image (static storage), not
// on the heap: the harness tells a GPU worker which library to load by
// dladdr() on the afz_kernel (harness/run/gpu/gpu_run.cpp), and heap memory
// belongs to no library.
constexpr size_t kKernelPool = 4096;  // kernels over all configurations of one process
afz_kernel kernel_pool[kKernelPool];
size_t pool_used = 0;

struct Table {
  OpKernelSet ops;
  afz_kernel* kernels = nullptr;
  int count = 0;
};
std::deque<Table>& tables() {
  static std::deque<Table> t;
  return t;
}
Table* current = nullptr;

// nullptr when the pool is exhausted.
Table* new_table(OpKernelSet ops) {
  const std::vector<afz_kernel>& builtins = builtin_kernels();
  const size_t n = builtins.size() + ops.kernels.size();
  if (n > kKernelPool - pool_used) return nullptr;
  Table& t = tables().emplace_back();
  t.ops = std::move(ops);
  t.kernels = kernel_pool + pool_used;
  t.count = int(n);
  std::copy(builtins.begin(), builtins.end(), t.kernels);
  std::copy(t.ops.kernels.begin(), t.ops.kernels.end(), t.kernels + builtins.size());
  pool_used += n;
  return &t;
}

// "ops=a.ops;ops=b.ops": ';'-separated key=value items ("" configures nothing).
bool parse_config(const std::string& config, std::vector<std::string>* ops_files, std::string* error) {
  size_t start = 0;
  while (start <= config.size()) {
    const size_t end = std::min(config.find(';', start), config.size());
    const std::string item = config.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (eq == std::string::npos || key != "ops" || eq + 1 == item.size()) {
      *error = "configuration item '" + item + "': expected ops=FILE (items separated by ';')";
      return false;
    }
    ops_files->push_back(item.substr(eq + 1));
  }
  return true;
}

bool configure(const std::string& config, std::string* error) {
  std::vector<std::string> files;
  if (!parse_config(config, &files, error)) return false;
  OpKernelSet all;
  std::map<std::string, std::string> declared;  // kernel name -> where
  for (const afz_kernel& k : builtin_kernels()) declared[k.name] = "a built-in kernel";
  for (const std::string& path : files) {
    OpsFile file;
    if (!read_ops_file(path, &file, error)) return false;
    for (const OpSpec& s : file.kernels) {
      const std::string here = s.file + ":" + std::to_string(s.line);
      if (auto [it, fresh] = declared.emplace(s.name, here); !fresh) {
        *error = here + ": kernel '" + s.name + "' is already " +
                 (it->second == "a built-in kernel" ? it->second : "declared at " + it->second);
        return false;
      }
    }
    OpKernelSet set;
    if (!build_op_kernels(file, &set, error)) return false;
    all.absorb(std::move(set));
  }
  Table* t = new_table(std::move(all));
  if (!t) {
    *error = "more than " + std::to_string(kKernelPool) + " kernels configured in one process";
    return false;
  }
  current = t;
  return true;
}

}  // namespace
}  // namespace afz::torchk

AFZ_EXPORT uint32_t attnfuzz_abi_version(void) { return AFZ_ABI_VERSION; }

AFZ_EXPORT int attnfuzz_configure(const char* config, char* error, size_t error_len) {
  try {
    std::string why;
    if (afz::torchk::configure(config ? config : "", &why)) return 0;
    afz::torchk::write_message(error, error_len, why);
  } catch (const std::exception& e) {
    afz::torchk::write_message(error, error_len, e.what());
  }
  return 1;
}

AFZ_EXPORT int attnfuzz_kernels(const afz_kernel** kernels, int* count) {
  using namespace afz::torchk;
  try {
    if (!current) current = new_table(OpKernelSet{});
  } catch (const std::exception&) {
    return 1;
  }
  if (!current) return 1;
  *kernels = current->kernels;
  *count = current->count;
  return 0;
}

AFZ_EXPORT int attnfuzz_backward_kernels(const afz_backward_kernel** kernels, int* count) {
  try {
    const std::vector<afz_backward_kernel>& ks = afz::torchk::builtin_backward_kernels();
    *kernels = ks.data();
    *count = int(ks.size());
    return 0;
  } catch (const std::exception&) {
    return 1;
  }
}

AFZ_EXPORT const char* attnfuzz_library_version(void) {
  static const std::string version = afz::torchk::library_version();
  return version.c_str();
}
