// The cuDNN operation graph of one attention BACKWARD problem, as plain data
// (the same SdpaGraph as the forward's, with reshape ops).  The graph is the
// one cudnn-frontend's SDPA backward node builds from matmul, pointwise,
// reduction and reshape nodes, which cuDNN's runtime-fusion engine
// recognizes as the flash-attention backward:
//
//   D   = sum_x (dO * O) * 1                    pointwise MUL, reduction ADD, MUL by one (the no-dropout scale)
//   S   = Q . K^T * scale (+ bias)              as the forward, then its masks (padding, causal/window bands)
//   S  -= Stats;  (padding again: cudnn-frontend's work-around for cuDNN >= 9.0)
//   P   = exp(S)                                fp32
//   dV  = reshape(P)^T . dO                     P^T in the input dtype (the tensor-core operand);
//                                               GQA: per query head, then a reduction over the group
//   dP  = dO . V^T * 1                          fp32
//   dS  = (dP - D) * P * scale                  fp32
//   dK  = reshape(dS)^T . Q                     dS^T in the input dtype; GQA as dV
//   dQacc = dS . K                              into an fp32 accumulator bound to our buffer (zeroed before
//                                               each run: the engine adds to it, with atomics)
//   dQ  = identity(dQacc)                       rounded to the input dtype
//
// Q, K, V take the strides of the problem given; O, dO, Stats, dQ, dK, dV and
// the accumulator are dense [b][h][s][x] (the kernel's scratch buffers).
#pragma once
#include "attnfuzz_kernel.h"
#include "kernels/cudnn/sdpa_graph.h"

namespace afz::cudnn {

// cudnn-frontend's backward pattern for cuDNN >= 9.0 (the only one built).
constexpr size_t kCudnnBackwardMinVersion = 90000;

// The backward graph of `p` (its shapes, scale, window and additive mask;
// a boolean mask must already be merged into the bias: std::invalid_argument
// otherwise).  Options as the forward's.  O is read only by the dO * O
// pointwise op, which takes fp32: `o_dtype` is the input dtype (as real
// callers store O) or AFZ_F32 (an O given unrounded).
SdpaGraph build_sdpa_bwd_graph(const afz_problem& p, const SdpaGraphOptions& o, afz_dtype o_dtype);

// Dense [b][h][s][x] strides of the backward's scratch tensors.
Dims dense_strides(const Dims& dims);

}  // namespace afz::cudnn
