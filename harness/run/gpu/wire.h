// Length-prefixed binary messages between the harness and its GPU worker
// process.  Both ends are the same binary on the same machine, so values go
// in native byte order; every read is bounds-checked, because a worker that
// died mid-message leaves a truncated one.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/abi/wire_format.h"

namespace afz::gpu {

// Whole frames over a stream socket: [u64 length][payload].
bool send_frame(int fd, const std::vector<uint8_t>& payload);
// Blocking read of one frame; false on EOF or error.
bool recv_frame(int fd, std::vector<uint8_t>* payload);

}  // namespace afz::gpu
