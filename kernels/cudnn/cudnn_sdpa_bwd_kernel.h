// cudnn.sdpa's backward: cuDNN's flash-attention backward (the node graph of
// sdpa_bwd_graph.h) as an afz_backward_kernel (AFZ_CAP_GPU), registered under
// the forward's name so that `--kernel cudnn.sdpa --pass bwd` pairs them.
// supports() runs in the harness on the host problem and makes no CUDA call;
// run() runs in a GPU worker on the device problem.
#pragma once
#include <string>

#include "attnfuzz_kernel.h"
#include "kernels/cudnn/cudnn_api.h"

namespace afz::cudnn {

const afz_backward_kernel& cudnn_sdpa_backward_kernel();

// supports()'s answer on the HOST backward problem against a given library:
// the load error, a version without the backward pattern, what the graph or
// cuDNN's support surface excludes, or what the seq lengths exclude.
std::string cudnn_sdpa_backward_unsupported_reason(const afz_backward_problem& host_problem, const CudnnLibrary& lib);

}  // namespace afz::cudnn
