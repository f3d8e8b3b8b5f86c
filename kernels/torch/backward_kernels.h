// The backward passes of PyTorch's attention backends as attnfuzz backward
// kernels, under the forward kernels' names (torch.flash, torch.efficient,
// torch.cudnn, torch.math, torch.flash_varlen), so `--pass both` pairs each
// with its forward.
#pragma once
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::torchk {

// Built once; the array lives as long as the library.
const std::vector<afz_backward_kernel>& builtin_backward_kernels();

}  // namespace afz::torchk
