// The cuDNN operation graph of one attention problem, as plain data: every
// tensor (uid, dtype, dims, strides, virtual or bound to a problem buffer or a
// by-value scalar) and every operation (matmul, pointwise, reduction) with its
// operands.  Computed without cuDNN, so it is unit-tested on any machine;
// sdpa_lowering turns it into backend descriptors.
//
// The graph is the one cudnn-frontend builds for sdpa() on cuDNN < 9.21
// (CompositeSDPANode; 9.19's fused CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR
// has no mask attributes), which cuDNN's runtime-fusion engine recognizes as
// flash attention:
//
//   S  = Q . K^T                      matmul, fp32 (K^T: K's dims/strides with s and d swapped)
//   S *= scale                        pointwise MUL by a by-value scalar: one plan serves every scale
//   S += bias                         optional: the additive mask, and the boolean mask as a 0/-inf
//                                     bias (mask_bias.h); broadcast where its stride is 0
//   S  = (i < sq_b && j < skv_b) ? S : fill       padding: GEN_INDEX rows/cols vs seq-len tensors
//   S  = (i + off + wr >= j) ? S : fill           right bound (causal: wr = 0)
//   S  = (j + wl + 1 - off > i) ? S : fill        left bound (sliding window)
//   M = max_j S;  E = exp(S - M);  L = sum_j E;  Stats = M + log L;  P = E / L (rounded to the input dtype)
//   O  = P . V                        matmul, fp32 accumulation, O in the input dtype
//
// with off = 0 (top-left) or skv - sq (bottom-right: per sequence from the
// seq-len tensors when padded, else from by-value scalars).  fill is -inf
// (cuDNN >= 9.10; the lowest float before, as cudnn-frontend does).
#pragma once
#include <cudnn_graph.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::cudnn {

using Dims = std::array<int64_t, 4>;

// What a non-virtual tensor is bound to in the variant pack.
// DO .. DQAccum: the backward graph's (sdpa_bwd_graph.h).
enum class Binding : int { None = 0, Q, K, V, O, Stats, SeqLenQ, SeqLenKv, Bias, Scalar, DO, DQ, DK, DV, DQAccum, Count };
constexpr size_t kBindingCount = size_t(Binding::Count);

// Fixed uids of the bound buffers; every other tensor is numbered from
// kFirstInternalUid in the order the graph is built, so one problem shape
// always gives the same uids (and the plan cache key the same text).
enum BoundUid : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidSeqLenQ,
  kUidSeqLenKv,
  kUidBias,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidDQAccum
};
constexpr int64_t kFirstInternalUid = 100;

// The byte alignment cudnn-frontend declares for every tensor; a buffer less
// aligned than this is declared with its true alignment instead.
constexpr int64_t kTensorAlignment = 16;

struct GraphTensor {
  int64_t uid = 0;
  std::string name;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  Dims dims{};
  Dims strides{};
  bool is_virtual = false;
  bool by_value = false;  // a host scalar passed in the variant pack (dims and strides all 1)
  // CUDNN_TENSOR_REORDERING_F16x16, as cudnn-frontend declares the backward's dQ accumulator.
  bool reorder_f16x16 = false;
  Binding binding = Binding::None;
  int64_t alignment = kTensorAlignment;
  float f32 = 0.0f;       // the by-value scalar, in the field dtype names
  int32_t i32 = 0;
  const void* value() const { return dtype == CUDNN_DATA_INT32 ? static_cast<const void*>(&i32) : &f32; }
};

enum class OpKind { Matmul, Pointwise, Reduction, Reshape };

struct GraphOp {
  OpKind kind = OpKind::Pointwise;
  std::string name;
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_ADD;      // pointwise
  cudnnReduceTensorOp_t reduce = CUDNN_REDUCE_TENSOR_ADD;  // reduction
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;            // math precision / comp type
  int64_t axis = -1;                                     // GEN_INDEX only
  // Operand uids, 0 = absent.  Pointwise X, B, T -> Y; matmul A (x), B (b) -> C (y); reduction and reshape X -> Y.
  int64_t x = 0, b = 0, t = 0, y = 0;
  int64_t m_override = 0, n_override = 0, k_override = 0;  // matmul: seq-len tensors when padded
};

struct SdpaGraphOptions {
  // Seq-len tensors, the padding mask and the matmul M/N/K overrides: for
  // varlen problems, and where cuDNN takes a mask only with padding (see
  // needs_padding).
  bool padded = false;
  size_t cudnn_version = 0;  // picks the mask fill value
  std::array<int64_t, kBindingCount> alignment = filled_alignment();

  static std::array<int64_t, kBindingCount> filled_alignment() {
    std::array<int64_t, kBindingCount> a{};
    a.fill(kTensorAlignment);
    return a;
  }
};

struct SdpaGraph {
  std::vector<GraphTensor> tensors;
  std::vector<GraphOp> ops;

  const GraphTensor* tensor(int64_t uid) const;
  // Everything that changes the compiled plan (dtypes, dims, strides,
  // alignments, which optional inputs and masks exist, the op list) and
  // nothing that does not: by-value scalar values (scale, window sizes, the
  // fill) are runtime arguments of one plan.
  std::string key() const;
};

// A problem with a boolean mask is refused (std::invalid_argument): the
// kernel turns it into the bias first (merge_masks).
SdpaGraph build_sdpa_graph(const afz_problem& p, const SdpaGraphOptions& o);

// Whether the problem takes the padded path, from HOST seq-len arrays:
// variable or zero lengths, or a bottom-right/left-bounded mask with
// max_seqlen_q > max_seqlen_k, which cuDNN supports only with the padding
// mask (cudnn-frontend's support surface).
bool needs_padding(const afz_problem& p, const int32_t* seqlens_q, const int32_t* seqlens_k);

// What the cuDNN graph cannot express or cuDNN's support surface excludes
// for this cuDNN version; "" when cuDNN gets to decide.  Shapes and strides
// only, no pointer is dereferenced: safe on the worker's device problem.
// Q/K/V/O strides that are not multiples of 8 elements are declined unless
// `allow_unaligned_rows`: cuDNN accepts them and computes wrong results.
std::string sdpa_unsupported_reason(const afz_problem& p, size_t cudnn_version, bool allow_unaligned_rows = false);

// What the sequence lengths (HOST arrays) exclude: a sequence with queries
// but no keys.  cuDNN returns NaN in O and the stats for its rows (measured on
// an H200, cuDNN 9.14 and 9.19: the padded path with seq_len_kv = 0 runs no
// key tile and divides 0 by 0), while a row whose keys are all masked gives
// O = 0 and -inf: one convention cannot describe both.
std::string seqlen_unsupported_reason(const afz_problem& p, const int32_t* seqlens_q, const int32_t* seqlens_k);

// The largest power of two dividing the address, capped at kTensorAlignment.
int64_t pointer_alignment(const void* ptr);

// The value masked scores are replaced with.
float mask_fill_value(size_t cudnn_version);

}  // namespace afz::cudnn
