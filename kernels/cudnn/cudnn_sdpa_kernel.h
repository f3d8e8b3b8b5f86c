// cudnn.sdpa: cuDNN's fused flash-attention forward as an afz_kernel
// (AFZ_CAP_GPU).  supports() runs in the harness on the host problem and
// makes no CUDA call; run() runs in a GPU worker process.
#pragma once
#include <string>

#include "attnfuzz_kernel.h"
#include "kernels/cudnn/cudnn_api.h"

namespace afz::cudnn {

const afz_kernel& cudnn_sdpa_kernel();
// The same without the guards against measured cuDNN defects (cudnn_sdpa_kernel.cpp).
const afz_kernel& cudnn_sdpa_raw_kernel();

// supports()'s answer on the HOST problem (it reads the seq lengths) against
// a given library: the library's load error when it did not load, else what
// the graph, cuDNN's support surface or the seq lengths exclude.
std::string cudnn_sdpa_unsupported_reason(const afz_problem& host_problem, const CudnnLibrary& lib);

}  // namespace afz::cudnn
