#include "kernels/cudnn/cudnn_api.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>

namespace afz::cudnn {
namespace {

constexpr const char* kEnvLibrary = "ATTNFUZZ_CUDNN_LIB";
constexpr const char* kDefaultSoname = "libcudnn.so.9";
// cudnnGetLastErrorString writes at most this much; longer messages are cut.
constexpr size_t kLastErrorBytes = 1024;
// Version encodings: cuDNN 9 is major*10000 + minor*100 + patch, cuDNN 8 major*1000 + ...
constexpr size_t kV9Major = 10000, kV8Major = 1000, kMinor = 100;

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The file dlopen really mapped: the link map's name (the search result for
// a bare soname), with symlinks resolved so the report names the real file.
std::string loaded_file(void* handle, const std::string& requested) {
  link_map* map = nullptr;
  std::string name;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) name = map->l_name;
  if (name.empty()) return requested;
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(name, ec);
  return ec ? name : real.string();
}

template <typename Fn>
bool resolve(void* handle, const char* symbol, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!*out && missing->empty()) *missing = symbol;
  return *out != nullptr;
}

}  // namespace

std::string version_text(size_t v) {
  const size_t major_unit = v >= 9 * kV9Major ? kV9Major : kV8Major;
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / kMinor) + "." +
         std::to_string(v % kMinor);
}

std::string CudnnLibrary::describe() const {
  if (!loaded) return "cuDNN not loaded: " + error;
  return "cuDNN " + version_text(version) + " (" + path + ")";
}

CudnnLibrary load_cudnn(const std::string& path) {
  CudnnLibrary lib;
  lib.requested = path;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    lib.error = "cannot dlopen '" + path + "': " + one_line(why ? why : "unknown error") +
                " (set " + kEnvLibrary + " to the libcudnn.so.9 to use)";
    return lib;
  }
  std::string missing;
  CudnnApi& a = lib.api;
  resolve(handle, "cudnnGetVersion", &a.GetVersion, &missing);
  resolve(handle, "cudnnGetErrorString", &a.GetErrorString, &missing);
  resolve(handle, "cudnnGetLastErrorString", &a.GetLastErrorString, &missing);
  resolve(handle, "cudnnCreate", &a.Create, &missing);
  resolve(handle, "cudnnDestroy", &a.Destroy, &missing);
  resolve(handle, "cudnnSetStream", &a.SetStream, &missing);
  resolve(handle, "cudnnBackendCreateDescriptor", &a.BackendCreateDescriptor, &missing);
  resolve(handle, "cudnnBackendDestroyDescriptor", &a.BackendDestroyDescriptor, &missing);
  resolve(handle, "cudnnBackendSetAttribute", &a.BackendSetAttribute, &missing);
  resolve(handle, "cudnnBackendGetAttribute", &a.BackendGetAttribute, &missing);
  resolve(handle, "cudnnBackendFinalize", &a.BackendFinalize, &missing);
  resolve(handle, "cudnnBackendExecute", &a.BackendExecute, &missing);
  const std::string file = loaded_file(handle, path);
  if (!missing.empty()) {
    lib.error = "'" + file + "' has no " + missing + " (not a cuDNN 9 library?)";
    dlclose(handle);
    return lib;
  }
  lib.version = a.GetVersion();
  if (lib.version < kMinCudnnVersion) {
    lib.error = "'" + file + "' is cuDNN " + version_text(lib.version) + "; the SDPA adapter needs cuDNN " +
                version_text(kMinCudnnVersion) + " or newer";
    dlclose(handle);
    return lib;
  }
  lib.loaded = true;
  lib.handle = handle;
  lib.path = file;
  return lib;
}

std::string cudnn_library_request() {
  const char* env = std::getenv(kEnvLibrary);
  return env && *env ? std::string(env) : std::string(kDefaultSoname);
}

const CudnnLibrary& cudnn_library() {
  static std::once_flag once;
  static CudnnLibrary lib;
  std::call_once(once, [] { lib = load_cudnn(cudnn_library_request()); });
  return lib;
}

std::string last_error_text(const CudnnApi& api) {
  char last[kLastErrorBytes] = {0};
  if (api.GetLastErrorString) api.GetLastErrorString(last, sizeof last);
  last[sizeof last - 1] = '\0';
  return one_line(last);
}

std::string status_text(const CudnnApi& api, cudnnStatus_t status) {
  const std::string last = last_error_text(api);
  std::string text = api.GetErrorString ? api.GetErrorString(status) : "cuDNN status";
  text += " (" + std::to_string(int(status)) + ")";
  if (!last.empty()) text += ": " + last;
  return text;
}

std::string mixed_install_note(const CudnnLibrary& lib) {
  if (!lib.loaded) return "";
  const std::string home = std::filesystem::path(lib.path).parent_path().string();
  struct Search {
    std::set<std::string> dirs;
  } search;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string_view name = info->dlpi_name ? info->dlpi_name : "";
        const std::string_view base = name.substr(name.rfind('/') == std::string_view::npos ? 0 : name.rfind('/') + 1);
        if (base.rfind("libcudnn_", 0) == 0) {
          std::error_code ec;
          const auto real = std::filesystem::canonical(std::string(name), ec);
          static_cast<Search*>(data)->dirs.insert((ec ? std::filesystem::path(name) : real).parent_path().string());
        }
        return 0;
      },
      &search);
  std::string note;
  for (const std::string& d : search.dirs)
    if (d != home) note += (note.empty() ? "" : ", ") + d;
  return note.empty() ? "" : "cuDNN sub-libraries loaded from " + note + ", not beside " + lib.path;
}

}  // namespace afz::cudnn

namespace afz {
std::string cudnn_library_version() { return cudnn::cudnn_library().describe(); }
}  // namespace afz
