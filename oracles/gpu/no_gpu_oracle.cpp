// make_gpu_oracle for builds without CUDA (compiled only then; see CMakeLists.txt).
#include "oracles/oracle.h"

namespace afz {

std::unique_ptr<Oracle> make_gpu_oracle(std::string* why) {
  if (why) *why = "this attnfuzz was built without CUDA (configure with nvcc present and -DATTNFUZZ_CUDA=ON)";
  return nullptr;
}

}  // namespace afz
