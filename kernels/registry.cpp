#include "kernels/registry.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include "kernels/abi/dtype.h"
#include "kernels/cpu/backward_kernels.h"

namespace afz {

// Until kernels/cuda defines its group, a weak empty definition keeps
// everything linking; a strong definition elsewhere wins.
// Caveat: the engine is a static archive, and the linker pulls an archive
// member only to resolve an undefined symbol.  This weak definition
// resolves the call below, so the strong definition takes effect only if
// its object file is linked for another reason.  When the real group
// lands, delete the stub here (that is the robust fix).  The mutants'
// group (kernels/mutants/mutant_kernels.cpp) has landed: no stub.
__attribute__((weak)) void register_gpu_kernels(KernelRegistry&) {}
__attribute__((weak)) void register_cudnn_kernels(KernelRegistry&) {}

namespace {

struct OriginTable {
  std::mutex mu;
  std::map<const void*, std::string> by_kernel;  // forward and backward kernels
};
OriginTable& origins() {
  static OriginTable t;
  return t;
}

}  // namespace

namespace {

void record_origin(const void* k, const std::string& origin) {
  OriginTable& t = origins();
  std::lock_guard<std::mutex> lock(t.mu);
  t.by_kernel[k] = origin;
}

std::string origin_of(const void* k) {
  OriginTable& t = origins();
  std::lock_guard<std::mutex> lock(t.mu);
  const auto it = t.by_kernel.find(k);
  return it == t.by_kernel.end() ? "" : it->second;
}

}  // namespace

std::string registered_origin(const afz_kernel* k) { return origin_of(k); }
std::string registered_origin(const afz_backward_kernel* k) { return origin_of(k); }

KernelRegistry KernelRegistry::with_builtins() {
  KernelRegistry r;
  register_cpu_reference_kernels(r);
  register_cpu_mutants(r);
  register_gpu_kernels(r);
  register_cudnn_kernels(r);
  for (const afz_backward_kernel& k : cpu_backward_kernels()) r.add_backward(&k, "builtin");
  for (const BackwardMutantInfo& m : cpu_backward_mutants()) r.add_backward(&m.kernel, "mutant");
  return r;
}

void KernelRegistry::add_backward(const afz_backward_kernel* k, std::string origin, std::string version) {
  if (!k || !k->name || !*k->name) throw std::invalid_argument("backward kernel without a name from " + origin);
  if (!k->run) throw std::invalid_argument(std::string("backward kernel ") + k->name + " has no run function");
  if (const BackwardKernelEntry* e = backward_entry(k->name))
    throw std::invalid_argument(std::string("duplicate backward kernel name ") + k->name + " (from " + origin +
                                ", already from " + e->origin + ")");
  record_origin(k, origin);
  backward_entries_.push_back({k, std::move(origin), std::move(version)});
}

const BackwardKernelEntry* KernelRegistry::backward_entry(const std::string& name) const {
  for (const BackwardKernelEntry& e : backward_entries_)
    if (name == e.kernel->name) return &e;
  return nullptr;
}

const afz_backward_kernel* KernelRegistry::find_backward(const std::string& name) const {
  const BackwardKernelEntry* e = backward_entry(name);
  return e ? e->kernel : nullptr;
}

void KernelRegistry::add(const afz_kernel* k, std::string origin, std::string version) {
  if (!k || !k->name || !*k->name) throw std::invalid_argument("kernel without a name from " + origin);
  if (!k->run) throw std::invalid_argument(std::string("kernel ") + k->name + " has no run function");
  for (const KernelEntry& e : entries_)
    if (std::string_view(e.kernel->name) == k->name)
      throw std::invalid_argument(std::string("duplicate kernel name ") + k->name + " (from " + origin +
                                  ", already from " + e.origin + ")");
  record_origin(k, origin);
  entries_.push_back({k, std::move(origin), std::move(version)});
}

void KernelRegistry::add_all(const afz_kernel* ks, int n, const std::string& origin, const std::string& version) {
  for (int i = 0; i < n; ++i) add(&ks[i], origin, version);
}

const KernelEntry* KernelRegistry::entry(const std::string& name) const {
  for (const KernelEntry& e : entries_)
    if (name == e.kernel->name) return &e;
  return nullptr;
}

const afz_kernel* KernelRegistry::find(const std::string& name) const {
  const KernelEntry* e = entry(name);
  return e ? e->kernel : nullptr;
}

namespace {

std::string one_line(const char* s) {
  std::string out = s ? s : "unknown error";
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

// Why a plugin's kernel table (forward or backward) cannot be registered,
// "" when it can: a kernel without a name or run function, or a name taken
// within the table or already registered (`taken` gives that origin).
template <typename Kernel, typename Taken>
std::string table_problem(const Kernel* ks, int n, const std::string& what, Taken taken) {
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    const Kernel& k = ks[i];
    if (!k.name || !*k.name) return what + " #" + std::to_string(i) + " has no name";
    if (!k.run) return what + " " + k.name + " has no run function";
    if (!names.insert(k.name).second) return "duplicate " + what + " name " + k.name + " within the library";
    if (const std::string* origin = taken(k.name))
      return "duplicate " + what + " name " + k.name + " (already from " + *origin + ")";
  }
  return "";
}

}  // namespace

// "path#config": the path is the whole spec when that is a file (a '#' in a
// file name), else the text before the first '#' that leaves a file; a
// config may hold '#' and '/' (the Python bridge's #path/to/file.py:name).
std::pair<std::string, std::string> split_library_spec(const std::string& spec) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(spec, ec)) return {spec, ""};
  for (size_t hash = spec.find('#'); hash != std::string::npos; hash = spec.find('#', hash + 1))
    if (std::filesystem::is_regular_file(spec.substr(0, hash), ec)) return {spec.substr(0, hash), spec.substr(hash + 1)};
  const size_t hash = spec.find('#');  // no file either way: say which path was looked for
  return hash == std::string::npos ? std::pair{spec, std::string()} : std::pair{spec.substr(0, hash), spec.substr(hash + 1)};
}

// The library stays loaded for the life of the process once its kernels are
// registered: the afz_kernel pointers point into it.
bool KernelRegistry::load_library(const std::string& spec, std::string* error) {
  const auto [path, config] = split_library_spec(spec);
  const bool has_config = path.size() < spec.size();
  auto fail = [&](const std::string& why) {
    if (error) *error = spec + ": " + why;
    return false;
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return fail("no such file");
  // An absolute path: dlopen would search the library path for a bare name.
  const std::string full = std::filesystem::absolute(path, ec).string();
  void* handle = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return fail("cannot load: " + one_line(dlerror()));
  auto fail_closed = [&](const std::string& why) {
    dlclose(handle);
    return fail(why);
  };

  auto version_fn = reinterpret_cast<afz_abi_version_fn>(dlsym(handle, AFZ_PLUGIN_ABI_SYMBOL));
  if (!version_fn)
    return fail_closed("missing symbol " AFZ_PLUGIN_ABI_SYMBOL " (not an attnfuzz kernel plugin?)");
  if (const uint32_t v = version_fn(); v != AFZ_ABI_VERSION)
    return fail_closed("built for kernel ABI version " + std::to_string(v) + ", attnfuzz speaks version " +
                       std::to_string(AFZ_ABI_VERSION));
  auto get_kernels = reinterpret_cast<afz_get_kernels_fn>(dlsym(handle, AFZ_PLUGIN_SYMBOL));
  auto get_backward = reinterpret_cast<afz_get_backward_kernels_fn>(dlsym(handle, AFZ_BACKWARD_PLUGIN_SYMBOL));
  if (!get_kernels && !get_backward)
    return fail_closed("missing symbol " AFZ_PLUGIN_SYMBOL " (and no " AFZ_BACKWARD_PLUGIN_SYMBOL " either)");
  if (auto configure = reinterpret_cast<afz_configure_fn>(dlsym(handle, AFZ_PLUGIN_CONFIGURE_SYMBOL))) {
    char why[512] = {0};
    if (configure(config.c_str(), why, sizeof why) != 0) {
      why[sizeof why - 1] = '\0';
      return fail_closed("configuration refused: " + one_line(why[0] ? why : "(no reason given)"));
    }
  } else if (has_config) {
    return fail_closed("a configuration '#" + config + "' was given, but the library exports no " +
                       AFZ_PLUGIN_CONFIGURE_SYMBOL);
  }
  std::string version;
  if (auto version_of = reinterpret_cast<afz_library_version_fn>(dlsym(handle, AFZ_PLUGIN_VERSION_SYMBOL)))
    if (const char* v = version_of()) version = one_line(v);

  const afz_kernel* kernels = nullptr;
  int count = 0;
  if (get_kernels) {
    if (const int rc = get_kernels(&kernels, &count); rc != 0)
      return fail_closed(AFZ_PLUGIN_SYMBOL " returned " + std::to_string(rc));
    if (!kernels) count = 0;
  }
  const afz_backward_kernel* backward = nullptr;
  int backward_count = 0;
  if (get_backward) {
    if (const int rc = get_backward(&backward, &backward_count); rc != 0)
      return fail_closed(AFZ_BACKWARD_PLUGIN_SYMBOL " returned " + std::to_string(rc));
    if (!backward) backward_count = 0;
  }
  if (count <= 0 && backward_count <= 0) return fail_closed("the library provides no kernels");

  // Check everything before adding anything: a rejected library leaves the
  // registry as it was.
  const auto origin_of = [](const auto* entry) { return entry ? &entry->origin : nullptr; };
  std::string why = table_problem(kernels, count, "kernel", [&](const char* n) { return origin_of(entry(n)); });
  if (why.empty())
    why = table_problem(backward, backward_count, "backward kernel",
                        [&](const char* n) { return origin_of(backward_entry(n)); });
  if (!why.empty()) return fail_closed(why);
  add_all(kernels, count > 0 ? count : 0, spec, version);
  for (int i = 0; i < backward_count; ++i) add_backward(&backward[i], spec, version);
  return true;
}

// Found through the library that defines k's run(): our own kernels have
// no such symbol, and a plugin loaded RTLD_LOCAL is reached by its handle.
std::optional<afz_kernel_timing> library_kernel_timing(const afz_kernel& k) {
  Dl_info info{};
  if (!k.run || !dladdr(reinterpret_cast<void*>(k.run), &info) || !info.dli_fname) return std::nullopt;
  void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
  if (!handle) return std::nullopt;
  auto fn = reinterpret_cast<afz_kernel_timing_fn>(dlsym(handle, AFZ_PLUGIN_TIMING_SYMBOL));
  afz_kernel_timing t{};
  const bool ok = fn && fn(&k, &t) == 0;
  dlclose(handle);  // RTLD_NOLOAD took a reference: give it back
  if (!ok) return std::nullopt;
  return t;
}

namespace {

std::string dtype_list_reason(const char* what, afz_dtype t) {
  return std::string(what) + " dtype " + std::string(dtype_name(t)) + " not supported";
}

bool dtype_ok(uint32_t mask, afz_dtype t) { return unsigned(t) < 32 && (mask & (1u << unsigned(t))) != 0; }

std::string head_dim_reason(const afz_caps& c, const char* what, int dim) {
  if (dim < c.min_head_dim || dim > c.max_head_dim)
    return std::string(what) + " " + std::to_string(dim) + " outside [" + std::to_string(c.min_head_dim) +
           ", " + std::to_string(c.max_head_dim) + "]";
  if (c.head_dim_multiple > 1 && dim % c.head_dim_multiple != 0)
    return std::string(what) + " " + std::to_string(dim) + " not a multiple of " +
           std::to_string(c.head_dim_multiple);
  return "";
}

// Whether a tensor is laid out as the dense BHSD array of its extents; a
// stride only matters along an extent above 1.
bool dense_bhsd(const afz_tensor& t, const int64_t (&extent)[4]) {
  int64_t expect = 1;
  for (int a = 3; a >= 0; --a) {
    if (extent[a] > 1 && t.stride[a] != expect) return false;
    expect *= extent[a];
  }
  return true;
}

bool is_varlen(const afz_problem& p) {
  for (int b = 0; b < p.batch; ++b)
    if (p.seqlens_q[b] != p.max_seqlen_q || p.seqlens_k[b] != p.max_seqlen_k || p.seqlens_q[b] == 0 ||
        p.seqlens_k[b] == 0)
      return true;
  return false;
}

}  // namespace

// Alignment: a kernel's alignment flags (CAUSAL_TOP_LEFT / _BOTTOM_RIGHT)
// state its convention for windows as well, so a window needs AFZ_CAP_WINDOW
// and the flag of its alignment.  Strides: without AFZ_CAP_STRIDED, q, k, v, o
// (and lse) must be dense BHSD; masks are always read through their strides
// by a kernel that claims them.  LSE is not a reason to decline: the harness
// passes lse = NULL to a kernel without AFZ_CAP_LSE.
std::string unsupported_reason(const afz_kernel& k, const afz_problem& p) {
  const afz_caps& c = k.caps;
  auto has = [&](uint32_t flag) { return (c.flags & flag) != 0; };

  for (auto [what, t] : {std::pair{"q", &p.q}, std::pair{"k", &p.k}, std::pair{"v", &p.v}})
    if (!dtype_ok(c.in_dtypes, t->dtype)) return dtype_list_reason(what, t->dtype);
  if (!dtype_ok(c.out_dtypes, p.o.dtype)) return dtype_list_reason("output", p.o.dtype);

  if (std::string r = head_dim_reason(c, "head_dim", p.head_dim); !r.empty()) return r;
  if (std::string r = head_dim_reason(c, "head_dim_v", p.head_dim_v); !r.empty()) return r;
  if (p.head_dim_v != p.head_dim && !has(AFZ_CAP_DV_NE_D)) return "head_dim_v != head_dim (AFZ_CAP_DV_NE_D)";

  if (p.has_window) {
    const bool bottom_right = p.align == AFZ_ALIGN_BOTTOM_RIGHT;
    const uint32_t align_flag = bottom_right ? AFZ_CAP_CAUSAL_BOTTOM_RIGHT : AFZ_CAP_CAUSAL_TOP_LEFT;
    const char* align_name = bottom_right ? "bottom-right" : "top-left";
    const bool causal = p.window_left < 0 && p.window_right == 0;
    if (!causal && !has(AFZ_CAP_WINDOW)) return "sliding window (AFZ_CAP_WINDOW)";
    if (!has(align_flag))
      return std::string(causal ? "causal mask" : "window") + " with " + align_name + " alignment (" +
             (bottom_right ? "AFZ_CAP_CAUSAL_BOTTOM_RIGHT" : "AFZ_CAP_CAUSAL_TOP_LEFT") + ")";
  }
  if (p.bool_mask.data && !has(AFZ_CAP_BOOL_MASK)) return "boolean mask (AFZ_CAP_BOOL_MASK)";
  if (p.add_mask.data && !has(AFZ_CAP_ADD_MASK)) return "additive mask (AFZ_CAP_ADD_MASK)";
  if (!has(AFZ_CAP_VARLEN) && p.seqlens_q && p.seqlens_k && is_varlen(p))
    return "variable or zero sequence lengths (AFZ_CAP_VARLEN)";
  if (p.heads_q != p.heads_kv && !has(AFZ_CAP_GQA)) return "heads_q != heads_kv (AFZ_CAP_GQA)";
  if (p.softcap != 0.0f && !has(AFZ_CAP_SOFTCAP)) return "softcap (AFZ_CAP_SOFTCAP)";

  if (!has(AFZ_CAP_STRIDED)) {
    const int64_t q_ext[4] = {p.batch, p.heads_q, p.max_seqlen_q, p.head_dim};
    const int64_t k_ext[4] = {p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim};
    const int64_t v_ext[4] = {p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim_v};
    const int64_t o_ext[4] = {p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v};
    if (!dense_bhsd(p.q, q_ext) || !dense_bhsd(p.k, k_ext) || !dense_bhsd(p.v, v_ext) ||
        !dense_bhsd(p.o, o_ext))
      return "strides other than dense BHSD (AFZ_CAP_STRIDED)";
    if (p.lse) {
      afz_tensor lse{};
      for (int a = 0; a < 3; ++a) lse.stride[a + 1] = p.lse_stride[a];
      const int64_t lse_ext[4] = {1, p.batch, p.heads_q, p.max_seqlen_q};
      if (!dense_bhsd(lse, lse_ext)) return "LSE strides other than dense (AFZ_CAP_STRIDED)";
    }
  }
  if (c.max_seqlen > 0 && (p.max_seqlen_q > c.max_seqlen || p.max_seqlen_k > c.max_seqlen))
    return "sequence length " + std::to_string(std::max(p.max_seqlen_q, p.max_seqlen_k)) + " above the kernel's " +
           std::to_string(c.max_seqlen);

  if (k.supports) {
    char reason[256] = {0};
    if (k.supports(&k, &p, reason, sizeof reason) != 0) {
      reason[sizeof reason - 1] = '\0';
      std::string why = one_line(reason);
      return why.empty() ? std::string(k.name) + " declines the problem" : why;
    }
  }
  return "";
}

}  // namespace afz
