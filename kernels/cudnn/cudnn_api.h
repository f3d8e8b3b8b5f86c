// cuDNN, loaded with dlopen at run time: attnfuzz has no link-time dependency
// on libcudnn, so one binary runs against whichever cuDNN 9 a machine has (the
// H200 has two: the system's in /usr/lib/x86_64-linux-gnu and PyTorch's) and
// says which one it ran.  ATTNFUZZ_CUDNN_LIB names the file; without it the
// dynamic linker's search for libcudnn.so.9 decides.
//
// Only the declarations of <cudnn_graph.h> are used (the function types, the
// enums); every function is called through the table below.
#pragma once
#include <cudnn_graph.h>

#include <cstddef>
#include <string>

namespace afz::cudnn {

// The functions the adapter calls, resolved from the loaded library.
struct CudnnApi {
  decltype(&::cudnnGetVersion) GetVersion = nullptr;
  decltype(&::cudnnGetErrorString) GetErrorString = nullptr;
  decltype(&::cudnnGetLastErrorString) GetLastErrorString = nullptr;
  decltype(&::cudnnCreate) Create = nullptr;
  decltype(&::cudnnDestroy) Destroy = nullptr;
  decltype(&::cudnnSetStream) SetStream = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) BackendCreateDescriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) BackendDestroyDescriptor = nullptr;
  decltype(&::cudnnBackendSetAttribute) BackendSetAttribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) BackendGetAttribute = nullptr;
  decltype(&::cudnnBackendFinalize) BackendFinalize = nullptr;
  decltype(&::cudnnBackendExecute) BackendExecute = nullptr;
};

// The oldest cuDNN whose backend API this adapter speaks: the SDPA graph's
// GEN_INDEX/BINARY_SELECT masks and matmul overrides need cuDNN 9.
constexpr size_t kMinCudnnVersion = 90000;

struct CudnnLibrary {
  bool loaded = false;
  std::string requested;  // what was asked of dlopen
  std::string path;       // the file really loaded (dlinfo, symlinks resolved)
  size_t version = 0;     // cudnnGetVersion(), e.g. 91900
  std::string error;      // why it is not loaded
  void* handle = nullptr; // kept open for the life of the process
  CudnnApi api;

  // "cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9)" or "cuDNN not loaded: <reason>".
  std::string describe() const;
};

// Opens `path` (a bare soname is searched like the dynamic linker does) and
// resolves the table.  Not cached: tests load bogus paths with it.
CudnnLibrary load_cudnn(const std::string& path);

// $ATTNFUZZ_CUDNN_LIB when set and not empty, else "libcudnn.so.9".
std::string cudnn_library_request();

// The process-wide library, loaded on first use (thread-safe) from
// cudnn_library_request().  Never unloaded: descriptors and plans live in it.
const CudnnLibrary& cudnn_library();

// 91900 -> "9.19.0" (cuDNN 9 encodes major*10000 + minor*100 + patch, cuDNN 8
// major*1000 + minor*100 + patch).
std::string version_text(size_t version);

// cuDNN's own words for a failed call: "CUDNN_STATUS_BAD_PARAM (2000): <the
// last-error text>", on one line.  Call right after the failing call: the
// last-error text is overwritten by the next one.
std::string status_text(const CudnnApi& api, cudnnStatus_t status);

// cudnnGetLastErrorString on one line ("" when cuDNN left none), for calls
// that fail without a status (heuristics that return no engine config).
std::string last_error_text(const CudnnApi& api);

// The directories of the cuDNN sub-libraries this process has loaded, when
// any differs from the main library's (a mixed install: cuDNN 9's libcudnn.so
// dlopens libcudnn_graph.so etc. and reuses one already loaded by soname);
// "" otherwise.  Only meaningful after a backend call.
std::string mixed_install_note(const CudnnLibrary& lib);

}  // namespace afz::cudnn

namespace afz {
// What the registry records for cudnn.sdpa: cudnn_library().describe().
std::string cudnn_library_version();
}  // namespace afz
