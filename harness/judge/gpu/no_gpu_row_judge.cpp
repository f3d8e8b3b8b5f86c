// make_gpu_row_judge for builds without CUDA (compiled only then; see CMakeLists.txt).
#include "harness/judge/gpu_verdict.h"

namespace afz {

std::unique_ptr<RowJudge> make_gpu_row_judge(const afz_kernel&, const Materialized&, const OracleResult&,
                                             std::string* why) {
  if (why) *why = "this attnfuzz was built without CUDA (configure with nvcc present and -DATTNFUZZ_CUDA=ON)";
  return nullptr;
}

}  // namespace afz
