// The Python kernel bridge as a kernel plugin:
//
//     attnfuzz --kernel-lib build/kernels/python/libattnfuzz_python.so#mymodule:kernel ...
//     attnfuzz --kernel-lib .../libattnfuzz_python.so#path/to/file.py:kernels,timeout=120 ...
//
// attnfuzz_configure starts a Python worker on the target (module:name or
// file.py:name, then optional key=value settings), which imports it and
// declares its kernels; attnfuzz_kernels hands the harness one afz_kernel
// per declaration, whose run() sends the problem to this thread's worker
// (python_worker.h).  The harness sees host kernels: the worker gets the
// harness's buffers through shared memory, and a GPU kernel's Python side
// owns its own CUDA context and copies in and out (timed apart), so the
// harness process never touches CUDA.
//
// Why a plugin and not a path in harness/run: the bridge is a kernel as the
// ABI sees it, with nothing the harness must know; its failure modes map
// onto run()'s return codes (AFZ_RUN_UNSUPPORTED, AFZ_RUN_HANG, an error);
// and origins, repro commands and workers load it like any other plugin.
//
// Environment: ATTNFUZZ_PYTHON names the interpreter (default python3 on
// PATH); ATTNFUZZ_PYTHONPATH where the attnfuzz package is (default: this
// checkout's python/ folder when it exists, else an installed package).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/python/python_worker.h"

namespace afz::python {
namespace {

// The harness's default --timeout: a Python call gets as long, unless the
// configuration says timeout=S.
constexpr double kDefaultCallTimeoutSeconds = 60;
// Importing torch or jax and creating a CUDA context can take a while.
constexpr double kStartTimeoutSeconds = 300;
constexpr const char* kDefaultInterpreter = "python3";

// How the bridge split a kernel's time, summed over this process's calls.
struct TimingTotals {
  int64_t calls = 0, compile_calls = 0;
  double compile_s = 0, run_s = 0, copy_s = 0;
};

struct Module;

// What afz_kernel::user points at: which module, which of its kernels.
struct KernelSlot {
  Module* module;
  uint32_t index;
};

// One configured target: its declarations, the afz_kernel table made of
// them, and the settings every worker for it starts with.
struct Module {
  std::string config;
  WorkerSettings settings;
  std::string library_version;
  std::vector<Declaration> declarations;  // owns the kernels' name strings
  std::vector<KernelSlot> slots;
  std::vector<afz_kernel> kernels;
  std::mutex timing_mu;
  std::vector<TimingTotals> timing;
};

// Modules live until the library is unloaded (never, by the registry): the
// afz_kernel pointers the harness holds point into them.
std::mutex g_modules_mu;
std::deque<std::unique_ptr<Module>> g_modules;
Module* g_last = nullptr;  // the one attnfuzz_kernels returns

// A worker per (harness thread, module): threads run cases concurrently.
struct ThreadWorkers {
  pid_t owner = getpid();
  std::map<const Module*, std::unique_ptr<PythonWorker>> by_module;
};

ThreadWorkers& thread_workers() {
  thread_local ThreadWorkers w;
  // An isolated case runs in a fork of the harness: its copy of the parent's
  // workers is the parent's, so the child starts its own.
  if (w.owner != getpid()) {
    for (auto& [m, worker] : w.by_module) worker->forget_inherited();
    w.by_module.clear();
    w.owner = getpid();
  }
  return w;
}

PythonWorker& worker_for(Module& m) {
  auto& slot = thread_workers().by_module[&m];
  if (!slot) slot = std::make_unique<PythonWorker>(m.settings);
  return *slot;
}

void write_line(char* buf, size_t len, const std::string& msg) {
  if (!buf || len == 0) return;
  size_t n = 0;
  for (; n + 1 < len && n < msg.size(); ++n) buf[n] = (msg[n] == '\n' || msg[n] == '\r') ? ' ' : msg[n];
  buf[n] = '\0';
}

int run_python(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
  const auto* slot = static_cast<const KernelSlot*>(self->user);
  Module& m = *slot->module;
  CallResult r = worker_for(m).call(slot->index, *const_cast<afz_problem*>(p));
  if (r.rc != 0) {
    write_line(error, error_len, r.message);
    return r.rc;
  }
  std::lock_guard<std::mutex> lock(m.timing_mu);
  TimingTotals& t = m.timing[slot->index];
  ++t.calls;
  (r.reply.first_of_shape ? t.compile_s : t.run_s) += r.reply.call_s;
  t.compile_calls += r.reply.first_of_shape;
  t.copy_s += r.reply.copy_in_s + r.reply.copy_out_s;
  return 0;
}

// The interpreter as a path execve can take: as given when it has a '/',
// else the first executable of that name on PATH.
std::string resolve_interpreter(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t at = 0;
  while (at <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string candidate = (end > at ? dirs.substr(at, end - at) : ".") + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return name;  // execve fails: the worker "could not be started"
}

std::string package_dir() {
  if (const char* env = std::getenv("ATTNFUZZ_PYTHONPATH")) return env;
#ifdef ATTNFUZZ_PYTHON_PACKAGE_DIR
  std::error_code ec;
  if (std::filesystem::exists(std::string(ATTNFUZZ_PYTHON_PACKAGE_DIR) + "/attnfuzz/__init__.py", ec))
    return ATTNFUZZ_PYTHON_PACKAGE_DIR;
#endif
  return "";
}

// "target[,key=value]...": false with a one-line *why.
bool parse_config(const std::string& config, WorkerSettings* s, std::string* why) {
  const size_t comma = config.find(',');
  s->target = config.substr(0, comma);
  if (s->target.empty()) {
    *why = "no Python target: load it as libattnfuzz_python.so#module:name or #path/to/file.py:name";
    return false;
  }
  s->call_timeout_s = kDefaultCallTimeoutSeconds;
  s->start_timeout_s = kStartTimeoutSeconds;
  size_t at = comma;
  while (at != std::string::npos) {
    const size_t next = config.find(',', at + 1);
    const std::string item = config.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key != "timeout") {
      *why = "unknown setting '" + item + "' (settings: timeout=SECONDS)";
      return false;
    }
    char* end = nullptr;
    const double t = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(t > 0)) {
      *why = "timeout=" + value + ": expected a positive number of seconds";
      return false;
    }
    s->call_timeout_s = t;
    at = next;
  }
  const char* interpreter = std::getenv("ATTNFUZZ_PYTHON");
  s->python = resolve_interpreter(interpreter && *interpreter ? interpreter : kDefaultInterpreter);
  s->python_path = package_dir();
  return true;
}

}  // namespace
}  // namespace afz::python

using namespace afz::python;

extern "C" {

__attribute__((visibility("default"))) uint32_t attnfuzz_abi_version(void) { return AFZ_ABI_VERSION; }

__attribute__((visibility("default"))) int attnfuzz_configure(const char* config, char* error,
                                                              size_t error_len) {
  auto m = std::make_unique<Module>();
  m->config = config ? config : "";
  std::string why;
  if (!parse_config(m->config, &m->settings, &why)) {
    write_line(error, error_len, why);
    return 1;
  }
  // The configuring thread's worker declares the kernels and stays on as
  // that thread's worker (a campaign with --jobs 1 reuses it).
  auto worker = std::make_unique<PythonWorker>(m->settings);
  Hello hello;
  if (!worker->start(&hello, &why)) {
    write_line(error, error_len, why);
    return 1;
  }
  m->library_version = "attnfuzz Python bridge: " + hello.library_version;
  m->declarations = std::move(hello.kernels);
  const size_t n = m->declarations.size();
  m->slots.resize(n);
  m->kernels.resize(n);
  m->timing.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Declaration& d = m->declarations[i];
    m->slots[i] = {m.get(), uint32_t(i)};
    afz_kernel& k = m->kernels[i];
    k = afz_kernel{};
    k.name = d.name.c_str();
    k.description = d.description.c_str();
    k.caps = d.caps;
    k.precision = d.precision;
    k.conventions = d.conventions;
    k.supports = nullptr;  // the declared caps decide; the kernel may still raise Unsupported
    k.run = run_python;
    k.user = &m->slots[i];
  }
  std::lock_guard<std::mutex> lock(g_modules_mu);
  thread_workers().by_module[m.get()] = std::move(worker);
  g_last = m.get();
  g_modules.push_back(std::move(m));
  return 0;
}

__attribute__((visibility("default"))) const char* attnfuzz_library_version(void) {
  std::lock_guard<std::mutex> lock(g_modules_mu);
  return g_last ? g_last->library_version.c_str() : "attnfuzz Python bridge (not configured)";
}

// The kernels of the module configured last: loading the library again with
// another target (a second --kernel-lib ...so#other:kernels) adds that
// module's kernels, not the first one's again.
__attribute__((visibility("default"))) int attnfuzz_kernels(const afz_kernel** kernels, int* count) {
  std::lock_guard<std::mutex> lock(g_modules_mu);
  if (!g_last) return 1;
  *kernels = g_last->kernels.data();
  *count = int(g_last->kernels.size());
  return 0;
}

// The bridge's split of a kernel's time (compile / run / copies) in this process.
__attribute__((visibility("default"))) int attnfuzz_kernel_timing(const afz_kernel* kernel, afz_kernel_timing* out) {
  if (!kernel || kernel->run != run_python || !out) return 1;
  const auto* slot = static_cast<const KernelSlot*>(kernel->user);
  Module& m = *slot->module;
  std::lock_guard<std::mutex> lock(m.timing_mu);
  const TimingTotals& t = m.timing[slot->index];
  *out = {t.calls, t.compile_calls, t.compile_s, t.run_s, t.copy_s};
  return 0;
}

}  // extern "C"
