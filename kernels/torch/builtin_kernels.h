// The five PyTorch attention backends as attnfuzz kernels: torch.flash,
// torch.efficient, torch.cudnn, torch.math and torch.flash_varlen.
#pragma once
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::torchk {

// Built once; the array lives as long as the library.
const std::vector<afz_kernel>& builtin_kernels();

}  // namespace afz::torchk
