// The problem's buffers as torch tensors, and the layout changes operators
// need: views without copies (from_blob with the problem's own strides),
// narrowing to the valid rows of a sequence, exact copies where an operator
// needs another layout (unit inner stride, repeated K/V heads, packed
// varlen), and the masks folded into one additive bias.
//
// Every copy made here is exact (a permutation or repetition of the same
// values, or a mask of 0 / -inf): the kernel under test sees the inputs the
// oracle sees.  The one rounding, the additive mask to a 16-bit bias, is
// checked and refused when it would change a value.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::torchk {

// afz_dtype -> torch dtype; nullopt for dtypes torch does not take here (fp8).
std::optional<at::ScalarType> scalar_type_of(afz_dtype t);
const char* dtype_label(afz_dtype t);  // "bf16", as the .ops format spells it

// A view of an ABI tensor [b][h][s][d] with the given extents: no copy.
at::Tensor wrap(const afz_tensor& t, const std::array<int64_t, 4>& extents, at::Device device);
// The LSE output [b][h][i] as an fp32 view, undefined when p.lse is null.
at::Tensor wrap_lse(const afz_problem& p, at::Device device);

// Host copy of n int32 values at `data` (device memory for GPU kernels: the
// attnfuzz worker hands run() its sequence lengths on the device).
std::vector<int32_t> host_int32(const int32_t* data, int64_t n, at::Device device);
// An int32 tensor on `device` holding `values` (cumulative sequence lengths).
at::Tensor device_int32(const std::vector<int32_t>& values, at::Device device);

// "[2, 4, 64, 64]", for messages.
std::string shape_text(at::IntArrayRef s);
// The bytes the tensors' elements take (undefined ones none): what an
// operator returns for outputs of these shapes and dtypes.
int64_t bytes_of(std::initializer_list<at::Tensor> tensors);
// Copies a returned tensor into a view of the problem's buffers after
// checking its shape ("" or why not): copy_ would broadcast a wrong but
// compatible shape without a word.
std::string copy_checked(at::Tensor dst, const at::Tensor& src, const char* what);

// t itself when its last dimension is unit-stride (what every fused
// attention operator checks), else a contiguous copy.
at::Tensor unit_inner_stride(const at::Tensor& t);
// K or V [n][heads_kv][s][d] with each head repeated heads_q / heads_kv
// times, query head h reading KV head h / (heads_q / heads_kv) as the ABI
// says: an exact copy for operators without grouped-query attention.
at::Tensor repeat_kv_heads(const at::Tensor& kv, int64_t heads_q);

// The masks of one slice folded into an additive bias [n][heads_q][sq][sk]:
// add_mask (fp32) plus -inf where bool_mask is 0.  Either may be undefined;
// the result is undefined when both are.  In `dtype`; when key_pad > 1 the
// key dimension's storage is padded to a multiple of key_pad elements, so
// every row starts aligned (the memory-efficient kernel's requirement; the
// padding is never read).
struct Bias {
  at::Tensor bias;
  std::string inexact;  // non-empty: rounding to dtype would change values (why)
};
Bias additive_bias(const at::Tensor& bool_mask, const at::Tensor& add_mask, int64_t heads_q, at::ScalarType dtype,
                   int64_t key_pad);

// Batch rows [b0, b0 + n) that share the sequence lengths (sq, sk).
struct Slice {
  int64_t b0, n, sq, sk;
};
// One slice for the whole batch when every sequence has the same lengths,
// else one per sequence with queries (a fixed-length operator cannot skip
// padding, so a ragged batch runs sequence by sequence, each call exact).
std::vector<Slice> plan_slices(const std::vector<int32_t>& seqlens_q, const std::vector<int32_t>& seqlens_k);

// Whether top-left and bottom-right alignment give the same causal/window
// mask for every sequence: seqlen_q == seqlen_k, or nothing to mask (no
// queries or no keys).  Reads the HOST problem's sequence lengths.
bool alignments_coincide(const afz_problem& p);

}  // namespace afz::torchk
