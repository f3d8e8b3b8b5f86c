// DeviceSession for builds without CUDA (compiled only then; see CMakeLists.txt).
#include "harness/run/gpu/device_session.h"

namespace afz::gpu {

std::unique_ptr<DeviceSession> DeviceSession::open(std::string* why, std::string*) {
  *why = std::string(kNoDevicePrefix) + ": this attnfuzz was built without CUDA (configure with nvcc present and -DATTNFUZZ_CUDA=ON)";
  return nullptr;
}

}  // namespace afz::gpu
