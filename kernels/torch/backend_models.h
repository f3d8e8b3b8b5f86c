// What PyTorch's attention backends compute and promise, read from their
// sources: head-dim limits, precision models, conventions and capabilities.
// Shared by the forward adapters (builtin_kernels.cpp) and the backward ones
// (backward_kernels.cpp), which wrap the same libraries.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::torchk {

// Head dims of the fused kernels: 16-bit elements in 16-byte vectors, so a
// multiple of 8 (FlashAttention-2 checks it, the memory-efficient kernel
// finds no aligned kernel otherwise, sdpa pads to it before calling them);
// FlashAttention-2's forward and cuDNN 9's fused fprop stop at 256.
constexpr int32_t kFusedHeadDimMultiple = 8;
constexpr int32_t kFusedMinHeadDim = 8;
constexpr int32_t kFlashMaxHeadDim = 256;
constexpr int32_t kCudnnMaxHeadDim = 256;
// The memory-efficient kernel (a gmem-accumulating variant) and the math
// path have no head-dim limit of their own.
constexpr int32_t kNoHeadDimLimit = std::numeric_limits<int32_t>::max();
// PyTorch's sdpa pads attn_bias's key dimension to 16 elements before the
// memory-efficient kernel (preprocess_mask), whose check_supported() wants
// every bias row aligned; we allocate the bias the same way for cuDNN too.
constexpr int64_t kBiasKeyAlignment = 16;
constexpr uint32_t kHalfTypes = (1u << AFZ_F16) | (1u << AFZ_BF16);
// (output, logsumexp, ...): the LSE's place in every fused schema's returns.
constexpr size_t kLseReturn = 1;
constexpr uint32_t kMathTypes = kHalfTypes | (1u << AFZ_F32);

// ---- Precision models ------------------------------------------------------
//
// FlashAttention-2 as vendored in PyTorch (flash_attn/softmax.h): q.k on
// tensor cores in fp32; exp2f(s * scale_log2 - m * scale_log2) with the
// product rounded on its own (UNFUSE_FMA); the row sum l adds the fp32 P
// before P is converted to the input dtype for the P.V GEMM (l from the
// unrounded P); acc fp32, O = acc * (1 / l).  exp_ulps 4, not 2: mha_fwd
// picks split-KV by an occupancy heuristic for small batch*heads, and the
// combine kernel weighs each split by one more exp; the LSE is
// m * scale + __logf(l), a fast log whose absolute error (~2^-21.4 near
// l = 1) the bound charges through exp_ulps.  Subnormal exp results may
// flush (fast-math exp2 on the SFU).
constexpr afz_precision kFlashPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/4.0f,
                                           /*flush_subnormals=*/1, /*l_from_unrounded_p=*/1};
// The CUTLASS memory-efficient kernel (mem_eff_attention/kernel_forward.h):
// s = (q.k) * scale (+ bias) in fp32, times log2 e, exp2f(s - m); s_prime
// sums the fp32 exps; P goes to shared memory as scalar_t (the input dtype)
// for the second GEMM; the output accumulates in fp32 (registers or an fp32
// buffer); O = acc * (1 / s_prime).  No split-KV; the LSE is
// m / log2 e + fast_log(s_prime): 3 ulps covers exp2f's 2 and the fast log.
constexpr afz_precision kEfficientPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/3.0f,
                                               /*flush_subnormals=*/1, /*l_from_unrounded_p=*/1};
// cuDNN's fused flash fprop (closed source): PyTorch builds the graph with
// fp32 intermediate and compute types and 16-bit io, so scores and stats are
// fp32 and P enters the P.V GEMM in the io dtype.  Whether l sums P before or
// after that rounding is not documented: declared 0, the looser LSE bound.
// exp_ulps as FlashAttention-2 (SFU exp2, possible split-KV, fast log).
constexpr afz_precision kCudnnPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/4.0f,
                                           /*flush_subnormals=*/1, /*l_from_unrounded_p=*/0};
// aten::_scaled_dot_product_attention_math (transformers/attention.cpp):
// unless allow_fp16_bf16_reduction_math_sdp is set (run() refuses then),
// fp16/bf16 q, k, v are converted to fp32 first; q and k are each scaled by
// sqrt(scale) in fp32, S = q k^T by an fp32 GEMM (no TF32: refused too), the
// mask added in fp32, _safe_softmax in fp32 (expf, then each weight divided
// by the row sum: P stays fp32 and is normalized BEFORE P.V, so exp_ulps 3 =
// expf's 2 + that division), P.V by an fp32 GEMM, then ONE rounding of O to
// the input dtype.  IEEE expf: no flushing.  The two sqrt(scale) products
// round once more each than the bound's "one rounding for the scale"; the
// backward (autograd through this forward) declares AFZ_CAP_BWD_OWN_FORWARD,
// whose bound charges them, its own normalization and D = rowsum(dP * P).
constexpr afz_precision kMathPrecision = {AFZ_F32, AFZ_F32, AFZ_F32, /*exp_ulps=*/3.0f,
                                          /*flush_subnormals=*/0, /*l_from_unrounded_p=*/1};

// ---- Conventions -----------------------------------------------------------
// FlashAttention-2: a row with no visible key (seqlen_k == 0, or a causal /
// window band that misses every key) gets O = 0 and LSE = +inf
// (normalize_softmax_lse; mha_fwd's seqlen_k == 0 branch fills +inf).
constexpr afz_conventions kFlashConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_POS_INF};
// Memory-efficient: O = 0 (the normalizer's s_prime == 0 guard).  Its LSE
// for such a row is neither -inf nor +inf: PyTorch >= 2.5 sets m = 0 and
// l = 1 there "so that log(1) = 0" (seen on the H200: LSE = 0): a documented
// choice, declared as AFZ_EMPTY_LSE_ZERO.  With seqlen_k == 0 it zeroes O
// and leaves the LSE unwritten (seen: 0, -0.31, 1.95, -1.7e-12): that stays a
// failure, since no convention makes a stale value right.
constexpr afz_conventions kEfficientConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_ZERO};
// cuDNN: undocumented; seen on the H200 (cuDNN 9.19.0, PyTorch 2.11.0) for a
// row masked by attn_bias: O = 0, LSE = -inf.
constexpr afz_conventions kCudnnConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};
// Math: _safe_softmax turns an all -inf row into zeros, so O = 0.  No LSE.
constexpr afz_conventions kMathConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};

// ---- Capabilities ----------------------------------------------------------
// Both causal alignments are declared; supports() declines the one the
// operator does not implement unless, sequence by sequence, the two give the
// same mask (seqlen_q == seqlen_k).  VARLEN: the fixed-length operators run a
// ragged batch one sequence per call (exact lengths, batch of one).
constexpr uint32_t kBothAlignments = AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT;
constexpr uint32_t kFused = kBothAlignments | AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_LSE | AFZ_CAP_STRIDED | AFZ_CAP_GPU;
constexpr uint32_t kMasks = AFZ_CAP_BOOL_MASK | AFZ_CAP_ADD_MASK;

// The ABI kernels of a table of entries (name, description, backend, caps,
// precision, conventions), each pointing at its entry's backend: shared by
// the forward (afz_kernel) and backward (afz_backward_kernel) tables.
template <class Kernel, class Entry, class Supports, class Run>
std::vector<Kernel> abi_kernels(Entry* table, size_t n, Supports supports, Run run) {
  std::vector<Kernel> ks;
  for (size_t i = 0; i < n; ++i) {
    Kernel k{};
    k.name = table[i].name;
    k.description = table[i].description;
    k.caps = table[i].caps;
    k.precision = table[i].precision;
    k.conventions = table[i].conventions;
    k.supports = supports;
    k.run = run;
    k.user = &table[i].backend;
    ks.push_back(k);
  }
  return ks;
}

// The math path's declared fp32 model holds only with torch's defaults: ""
// when it does, else why not (reduced-precision reductions, TF32 matmuls).
std::string math_precision_changed();

}  // namespace afz::torchk
