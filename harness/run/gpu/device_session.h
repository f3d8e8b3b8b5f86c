// One CUDA context for the worker: device memory with guard support, a
// stream, and timing.  Built only with CUDA; without it open() says why.
// Nothing in here may run in the campaign's own process: CUDA contexts do not
// survive fork(), and a sticky fault must end only the worker.
#pragma once
#include <memory>
#include <string>

#include "harness/run/gpu/guarded_memory.h"

namespace afz::gpu {

// How open()'s *why begins when no device is usable (is_no_device_detail).
inline constexpr const char* kNoDevicePrefix = "no CUDA device";

class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  // nullptr with *why when there is no usable device (or no CUDA in this build).
  static std::unique_ptr<DeviceSession> open(std::string* why, std::string* device_name);
  virtual GuardedMemory& memory() = 0;
  virtual void* stream() = 0;  // cudaStream_t
  virtual void start_timer() = 0;
  // Waits for the stream; "" or the CUDA error line (a sticky fault included).
  virtual std::string finish(double* kernel_seconds) = 0;
};

}  // namespace afz::gpu
