// From an SdpaGraph to an execution plan: descriptors, the operation graph,
// engine configs from cuDNN's heuristics (mode A, then the fallback list),
// the first config whose execution plan finalizes.  Finalizing a plan of the
// runtime-fusion engine generates and compiles a kernel (NVRTC): hundreds of
// milliseconds to seconds, which is why the kernel caches plans.
#pragma once
#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cudnn/backend_descriptor.h"
#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/sdpa_graph.h"
#include "kernels/cudnn/sdpa_lowering.h"

namespace afz::cudnn {

// cuDNN refused the graph: no engine config of the heuristics finalized.
// what() is cuDNN's reason, on one line.
class PlanRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SdpaPlan {
  // Everything the plan was made from stays alive with it: the backend API
  // does not promise that a plan owns copies of its configs and graph.
  LoweredGraph lowered;
  BackendDescriptor operation_graph;
  std::vector<BackendDescriptor> heuristics;
  std::vector<BackendDescriptor> configs;
  BackendDescriptor plan;
  int64_t workspace_bytes = 0;
  std::string engine;  // "engine 8 (runtime-compiled)": which engine runs, for messages
  bool nondeterministic = false;  // the engine's CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
};

// Whether engines that cuDNN notes as nondeterministic may run.
enum class Determinism { Required, Allowed };

// Throws PlanRefused when cuDNN refuses (with its reason), CudnnCallError on
// a descriptor failure.
std::unique_ptr<SdpaPlan> build_sdpa_plan(const CudnnApi& api, cudnnHandle_t handle, const SdpaGraph& g,
                                          Determinism determinism = Determinism::Required);

}  // namespace afz::cudnn
