// An SdpaGraph as cuDNN backend descriptors: one tensor descriptor per tensor,
// one operation descriptor (and its pointwise/matmul/reduction descriptor)
// per op, all finalized.  None of this needs a handle or a GPU, so a CPU-only
// machine with libcudnn checks every attribute (tests/kernels/cudnn); the
// operation graph, the first step that needs a handle, is separate.
#pragma once
#include <cudnn_graph.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cudnn/backend_descriptor.h"
#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/sdpa_graph.h"

namespace afz::cudnn {

// "CUDNN_POINTWISE_GEN_INDEX", for labels.
const char* pointwise_mode_name(cudnnPointwiseMode_t mode);

struct LoweredGraph {
  std::vector<int64_t> uids;                  // tensors[i] has uid uids[i]
  std::vector<BackendDescriptor> tensors;
  std::vector<BackendDescriptor> op_configs;  // the pointwise / matmul / reduction descriptors
  std::vector<BackendDescriptor> operations;  // in graph order

  const BackendDescriptor& tensor(int64_t uid) const;
};

// Throws CudnnCallError naming the tensor or operation and the attribute.
LoweredGraph lower_sdpa_graph(const CudnnApi& api, const SdpaGraph& g);

// The operation graph over all operations; `handle` may be null where the
// library accepts that (cuDNN 9 deprecates CUDNN_ATTR_OPERATIONGRAPH_HANDLE).
BackendDescriptor make_operation_graph(const CudnnApi& api, const LoweredGraph& lowered, cudnnHandle_t handle);

// The variant pack of one execution: device pointers (and host pointers of
// by-value scalars) per uid, and the workspace.
BackendDescriptor make_variant_pack(const CudnnApi& api, const std::vector<int64_t>& uids,
                                    const std::vector<void*>& pointers, void* workspace);

}  // namespace afz::cudnn
