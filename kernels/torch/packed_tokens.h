// FlashAttention's varlen layout, both ways: the [B][H][S_max][D] views of
// a problem's buffers packed into [total][H][D] token-major tensors (each
// sequence's valid rows, one after another: an exact copy), with the
// cumulative lengths, and a packed result written back into the valid rows
// of such a view (padding rows and row gaps untouched).  Shared by the
// forward varlen adapter (problem_run.cpp) and the backward one
// (backward_run.cpp); no CUDA here, so the CPU tests call it directly.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace afz::torchk {

// Where each sequence's tokens start in the packed tensor.
struct TokenPacking {
  std::vector<int32_t> lengths;     // per sequence
  std::vector<int32_t> cumulative;  // [B + 1]: 0, l0, l0 + l1, ... (FlashAttention's cu_seqlens)
  int64_t max_length = 0;

  int64_t total() const { return cumulative.back(); }
  int64_t start(size_t b) const { return cumulative[b]; }
};
TokenPacking token_packing(const std::vector<int32_t>& lengths);

// [B][H][S_max][D] -> [total][H][D], contiguous.
at::Tensor pack_tokens(const at::Tensor& x, const TokenPacking& pk);
// [B][H][S_max] -> [H][total], contiguous: the unpadded varlen LSE that
// PyTorch 2.11's FlashAttention returns and its varlen backward reads
// (flash_api.cpp, mha_varlen_bwd: unpadded_lse = true).
at::Tensor pack_lse_heads_by_tokens(const at::Tensor& lse, const TokenPacking& pk);
// Writes packed [total][H][D] into the valid rows of dst [B][H][S_max][D]
// after checking its shape: "" or why not (`what` names it in the message).
std::string unpack_tokens(const at::Tensor& packed, const at::Tensor& dst, const TokenPacking& pk, const char* what);

}  // namespace afz::torchk
