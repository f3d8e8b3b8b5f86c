#include "kernels/cudnn/sdpa_plan.h"

#include <array>
#include <utility>

namespace afz::cudnn {
namespace {

struct EngineInfo {
  int64_t index = -1;
  bool nondeterministic = false;
  bool runtime_compiled = false;
  std::string describe() const {
    std::string notes = runtime_compiled ? "runtime-compiled" : "";
    if (nondeterministic) notes += std::string(notes.empty() ? "" : ", ") + "nondeterministic";
    return "engine " + std::to_string(index) + (notes.empty() ? "" : " (" + notes + ")");
  }
};

// The engine behind a config, and the notes that matter here.  A failure to
// read them is not fatal: the plan still says whether it runs.
EngineInfo engine_of(const CudnnApi& api, const BackendDescriptor& config) {
  EngineInfo info;
  try {
    BackendDescriptor engine(api, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine of " + config.label());
    cudnnBackendDescriptor_t raw = engine.get();
    int64_t n = 0;
    if (api.BackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                &raw) != CUDNN_STATUS_SUCCESS)
      return info;
    api.BackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index);
    std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
    if (api.BackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                int64_t(notes.size()), &n, notes.data()) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < n && i < int64_t(notes.size()); ++i)
        info.nondeterministic |= notes[size_t(i)] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
    if (api.BackendGetAttribute(raw, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                int64_t(behavior.size()), &n, behavior.data()) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < n && i < int64_t(behavior.size()); ++i)
        info.runtime_compiled |= behavior[size_t(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  } catch (const CudnnCallError&) {
  }
  return info;
}

const char* heur_mode_name(cudnnBackendHeurMode_t mode) {
  return mode == CUDNN_HEUR_MODE_A ? "CUDNN_HEUR_MODE_A" : "CUDNN_HEUR_MODE_FALLBACK";
}

}  // namespace

std::unique_ptr<SdpaPlan> build_sdpa_plan(const CudnnApi& api, cudnnHandle_t handle, const SdpaGraph& g,
                                          Determinism determinism) {
  auto out = std::make_unique<SdpaPlan>();
  out->lowered = lower_sdpa_graph(api, g);
  try {
    out->operation_graph = make_operation_graph(api, out->lowered, handle);
  } catch (const CudnnCallError& e) {
    throw PlanRefused(e.what());  // the graph as a whole: cuDNN's verdict on the pattern
  }

  std::string first_refusal, skipped, empty, found;
  int tried = 0;
  // Mode A ranks the engines that match; the fallback list catches graphs
  // the ranked list leaves empty.
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      BackendDescriptor heur(api, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
                             std::string("engine heuristics (") + heur_mode_name(mode) + ")");
      heur.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), out->operation_graph);
      heur.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_TYPE_HEUR_MODE, 1, &mode);
      heur.finalize();
      int64_t count = 0;
      heur.check(api.BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &count, nullptr),
                 "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS) count");
      if (count == 0) {
        const std::string last = last_error_text(api);
        empty += std::string(empty.empty() ? "" : "; ") + heur_mode_name(mode) + " found no engine config" +
                 (last.empty() ? "" : " (" + last + ")");
        continue;
      }
      std::vector<BackendDescriptor> configs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        configs.emplace_back(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                             std::string("engine config ") + std::to_string(i) + " of " + heur_mode_name(mode));
        raw.push_back(configs.back().get());
      }
      int64_t returned = 0;
      heur.check(api.BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         count, &returned, raw.data()),
                 "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
      found += std::string(found.empty() ? "" : ", ") + heur_mode_name(mode) + " " + std::to_string(returned) +
               " of " + std::to_string(count);
      for (int64_t i = 0; i < returned && i < count; ++i) {
        const EngineInfo engine = engine_of(api, configs[size_t(i)]);
        // A kernel declared deterministic (the forward) must not run an
        // engine cuDNN flags as nondeterministic: it would break that promise.
        if (engine.nondeterministic && determinism == Determinism::Required) {
          skipped += (skipped.empty() ? "" : ", ") + engine.describe();
          continue;
        }
        ++tried;
        try {
          BackendDescriptor plan(api, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                 "execution plan of " + engine.describe());
          plan.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle);
          plan.set_descriptor(AFZ_CUDNN_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), configs[size_t(i)]);
          plan.finalize();  // runtime-fusion engines compile their kernel here
          int64_t n = 0;
          plan.check(api.BackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                             &n, &out->workspace_bytes),
                     "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)");
          out->plan = std::move(plan);
          out->engine = engine.describe();
          out->nondeterministic = engine.nondeterministic;
          out->heuristics.push_back(std::move(heur));
          out->configs = std::move(configs);
          return out;
        } catch (const CudnnCallError& e) {
          if (first_refusal.empty()) first_refusal = e.what();
        }
      }
    } catch (const CudnnCallError& e) {
      if (first_refusal.empty()) first_refusal = e.what();
    }
  }
  std::string why = "cuDNN has no engine for this SDPA graph: " + std::to_string(tried) + " engine configs tried";
  if (!found.empty()) why += " (configs returned: " + found + ")";
  if (!empty.empty()) why += "; " + empty;
  if (!skipped.empty()) why += "; nondeterministic ones skipped (" + skipped + ")";
  if (!first_refusal.empty()) why += "; first refusal: " + first_refusal;
  throw PlanRefused(why);
}

}  // namespace afz::cudnn
