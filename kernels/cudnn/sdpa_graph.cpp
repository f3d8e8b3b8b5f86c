#include "kernels/cudnn/sdpa_graph.h"

#include "kernels/cudnn/sdpa_graph_builder.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace afz::cudnn {
namespace {

// cuDNN versions named by cudnn-frontend's SDPA support surface
// (include/cudnn_frontend/node/sdpa_support_surface.h), whose rules mirror
// backend limits and known backend bugs.
constexpr size_t kCudnn9_6_0 = 90600;
constexpr size_t kCudnn9_10_0 = 91000;
constexpr size_t kCudnn9_10_1 = 91001;
constexpr size_t kCudnn9_10_2 = 91002;
constexpr size_t kCudnn9_14_0 = 91400;
constexpr size_t kCudnn9_26_0 = 92600;
// cuDNN 9.14.0's sliding-window bug shows past this many keys.
constexpr int64_t kCudnn9_14_0WindowBugKeys = 1024;
// Before 9.6.0 bottom-right masks needed both lengths a multiple of this.
constexpr int64_t kOldBottomRightTile = 64;
// Rows 16 bytes apart: what cuDNN's fused kernels compute correctly (their
// 16-byte vector and TMA loads); see stride_reason.
constexpr int64_t kRowAlignElements = 8;  // of a 2-byte dtype
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kHeadDimMultiple = 8;
constexpr const char* kAxisName[kAxes] = {"batch", "head", "sequence", "head-dim"};


std::string stride_reason(const char* what, const afz_tensor& t, const Dims& extent, bool allow_unaligned_rows) {
  if (t.stride[kAxes - 1] != 1)
    return std::string(what) + ": head-dim stride " + std::to_string(t.stride[kAxes - 1]) +
           ", cuDNN's SDPA needs 1 (contiguous rows)";
  for (int a = 0; a < kAxes - 1; ++a) {
    if (extent[a] <= 1) continue;
    const std::string axis = std::string(what) + ": " + kAxisName[a] + " stride " + std::to_string(t.stride[a]);
    if (t.stride[a] == 0) return axis + " (a broadcast): cuDNN's SDPA takes no stride-0 Q/K/V/O";
    if (t.stride[a] < 0) return axis + ": cuDNN tensors take no negative strides";
    if (!allow_unaligned_rows && t.stride[a] % kRowAlignElements != 0)
      return axis + " is not a multiple of " + std::to_string(kRowAlignElements) +
             " elements: cuDNN builds a plan for such rows but computes a wrong O and writes into the row gaps "
             "(measured, cuDNN 9.14 and 9.19 on H200; cudnn.sdpa.raw runs them)";
  }
  return "";
}

// The additive mask is a cuDNN tensor (its key axis contiguous or a
// broadcast) unless a boolean mask is merged into it on the host, which reads
// any non-negative strides.
std::string mask_reason(const char* what, const afz_tensor& t, afz_dtype want, const char* want_name,
                        const Dims& extent, bool device_tensor) {
  if (t.dtype != want) return std::string(what) + " must be " + want_name;
  for (int a = 0; a < kAxes; ++a)
    if (t.stride[a] < 0) return std::string(what) + ": negative strides are not taken";
  if (device_tensor && extent[kAxes - 1] > 1 && t.stride[kAxes - 1] != 1 && t.stride[kAxes - 1] != 0)
    return std::string(what) + ": key stride " + std::to_string(t.stride[kAxes - 1]) +
           ", the cuDNN graph takes 1 (or 0, a broadcast)";
  return "";
}

}  // namespace

const GraphTensor* SdpaGraph::tensor(int64_t uid) const {
  for (const GraphTensor& t : tensors)
    if (t.uid == uid) return &t;
  return nullptr;
}

std::string SdpaGraph::key() const {
  std::ostringstream k;
  for (const GraphTensor& t : tensors) {
    k << 't' << t.uid << ':' << int(t.dtype) << (t.is_virtual ? 'v' : 'n') << (t.by_value ? 's' : 'd')
      << (t.reorder_f16x16 ? 'r' : '-') << t.alignment;
    for (int64_t x : t.dims) k << ',' << x;
    for (int64_t x : t.strides) k << ',' << x;
    k << ';';
  }
  for (const GraphOp& o : ops)
    k << 'o' << int(o.kind) << ':' << int(o.mode) << ',' << int(o.reduce) << ',' << int(o.compute) << ',' << o.axis
      << ',' << o.x << ',' << o.b << ',' << o.t << ',' << o.y << ',' << o.m_override << ',' << o.n_override << ','
      << o.k_override << ';';
  return k.str();
}

float mask_fill_value(size_t cudnn_version) {
  // cudnn-frontend: "older cuDNN version prefers lowest for softmax mask".
  // With -inf a row whose every key is masked computes exp(-inf - -inf) =
  // NaN in the graph's own arithmetic unless the kernel guards it.
  return cudnn_version < kCudnn9_10_0 ? std::numeric_limits<float>::lowest()
                                      : -std::numeric_limits<float>::infinity();
}

int64_t pointer_alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (address == 0) return kTensorAlignment;
  return std::min<int64_t>(kTensorAlignment, int64_t(address & (~address + 1)));
}

bool needs_padding(const afz_problem& p, const int32_t* seqlens_q, const int32_t* seqlens_k) {
  for (int b = 0; b < p.batch; ++b)
    if (seqlens_q[b] != p.max_seqlen_q || seqlens_k[b] != p.max_seqlen_k) return true;
  const Window w = window_of(p);
  return (w.bottom_right || w.left) && p.max_seqlen_q > p.max_seqlen_k;
}

SdpaGraph build_sdpa_graph(const afz_problem& p, const SdpaGraphOptions& o) {
  if (p.bool_mask.data)
    throw std::invalid_argument("sdpa graph: the boolean mask reaches cuDNN as the bias (merge_masks), not as such");
  Builder g(p, o);
  const int64_t b = p.batch, hq = p.heads_q, hk = p.heads_kv, sq = p.max_seqlen_q, skv = p.max_seqlen_k;
  const int64_t d = p.head_dim, dv = p.head_dim_v;
  const cudnnDataType_t io = io_type(p.q.dtype);
  const Dims scores = {b, hq, sq, skv};

  const int64_t q = g.bound(Binding::Q, kUidQ, "Q", io, {b, hq, sq, d}, strides_of(p.q));
  // K^T is K itself read transposed: [b, hk, d, skv] with K's s and d strides swapped.
  const Dims k_dims = {b, hk, skv, d};
  const Dims ks = normalized_strides(k_dims, strides_of(p.k));
  const int64_t kt = g.bound(Binding::K, kUidK, "K^T", io, {b, hk, d, skv}, {ks[0], ks[1], ks[3], ks[2]});
  const int64_t v = g.bound(Binding::V, kUidV, "V", io, {b, hk, skv, dv}, strides_of(p.v));
  const int64_t out = g.bound(Binding::O, kUidO, "O", io, {b, hq, sq, dv}, strides_of(p.o));
  const Dims rows = {b, hq, sq, 1};
  const int64_t stats = p.lse ? g.bound(Binding::Stats, kUidStats, "Stats", CUDNN_DATA_FLOAT, rows,
                                        {p.lse_stride[0], p.lse_stride[1], p.lse_stride[2], 1})
                              : 0;
  if (o.padded) bind_seqlens(g, b);
  const int64_t seq_q = o.padded ? int64_t(kUidSeqLenQ) : 0, seq_kv = o.padded ? int64_t(kUidSeqLenKv) : 0;

  const int64_t s = masked_scores(g, p, o, q, kt, g.scalar_f32("attn_scale.scale", p.scale));

  // Softmax as cudnn-frontend's composite softmax: the stats are computed
  // (into a virtual tensor when no LSE is wanted), as the frontend always does.
  const int64_t m = g.reduce_keys("softmax.max", CUDNN_REDUCE_TENSOR_MAX, s);
  const int64_t centered = g.pointwise("softmax.sub", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s, m);
  const int64_t e = g.pointwise("softmax.exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, centered);
  const int64_t l = g.reduce_keys("softmax.sum", CUDNN_REDUCE_TENSOR_ADD, e);
  const int64_t log_l = g.pointwise("softmax.log", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, l);
  const int64_t lse = stats ? stats : g.virt("softmax.stats.out", CUDNN_DATA_FLOAT, rows);
  g.pointwise_to("softmax.stats", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, log_l, 0, lse);
  // P in the input dtype: bmm2's A operand must be the I/O type (the tensor-core GEMM rounds P here).
  const int64_t prob = g.virt("softmax.P", io, scores);
  g.pointwise_to("softmax.div", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, l, 0, prob);
  g.matmul("bmm2 P.V", prob, v, out, seq_q, 0, seq_kv);
  return g.take();
}

std::string sdpa_unsupported_reason(const afz_problem& p, size_t version, bool allow_unaligned_rows) {
  if (!is_b16(p.q.dtype) || p.k.dtype != p.q.dtype || p.v.dtype != p.q.dtype || p.o.dtype != p.q.dtype)
    return "q, k, v and o must share one dtype, fp16 or bf16 (cuDNN's SDPA writes O in the input dtype)";
  if (p.softcap != 0.0f) return "softcap: not expressed in the cuDNN graph";
  if (p.batch < 1 || p.heads_q < 1 || p.heads_kv < 1 || p.heads_q % p.heads_kv != 0)
    return "heads_q must be a positive multiple of heads_kv";
  if (p.max_seqlen_q < 1 || p.max_seqlen_k < 1) return "max_seqlen_q and max_seqlen_k must be >= 1 (cuDNN extents)";
  for (int dim : {p.head_dim, p.head_dim_v})
    if (dim < kHeadDimMultiple || dim > kMaxHeadDim || dim % kHeadDimMultiple != 0)
      return "head dims must be multiples of 8 up to 256 (cuDNN's SDPA support surface)";

  const Dims q_ext = {p.batch, p.heads_q, p.max_seqlen_q, p.head_dim};
  const Dims k_ext = {p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim};
  const Dims v_ext = {p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim_v};
  const Dims o_ext = {p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v};
  struct Operand {
    const char* name;
    const afz_tensor& t;
    Dims extent;
  };
  for (const Operand& x : {Operand{"q", p.q, q_ext}, Operand{"k", p.k, k_ext}, Operand{"v", p.v, v_ext},
                           Operand{"o", p.o, o_ext}})
    if (std::string why = stride_reason(x.name, x.t, x.extent, allow_unaligned_rows); !why.empty()) return why;

  const Dims scores = {p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k};
  if (p.bool_mask.data)
    if (std::string why = mask_reason("boolean mask", p.bool_mask, AFZ_U8, "u8", scores, false); !why.empty())
      return why;
  if (p.add_mask.data)
    if (std::string why = mask_reason("additive mask", p.add_mask, AFZ_F32, "fp32", scores, !p.bool_mask.data);
        !why.empty())
      return why;

  if (p.lse && version < kCudnn9_26_0) {
    const Dims rows = {p.batch, p.heads_q, p.max_seqlen_q, 1};
    const Dims have = normalized_strides(rows, {p.lse_stride[0], p.lse_stride[1], p.lse_stride[2], 1});
    if (have != packed_strides(rows))
      return "LSE strides other than dense [b][h][i]: cuDNN before 9.26 writes non-packed Stats wrongly "
             "(cudnn-frontend refuses them)";
  }

  // cudnn-frontend's support surface for fp16/bf16 SDPA (known backend limits and bugs).
  if (version == kCudnn9_10_0 || version == kCudnn9_10_1)
    return "cuDNN 9.10.0 and 9.10.1 have known SDPA forward bugs (cudnn-frontend refuses them)";
  const Window w = window_of(p);
  // The boolean mask is a bias too (mask_bias.h).
  const bool bias = p.add_mask.data || p.bool_mask.data;
  if (w.bottom_right && bias)
    return "bottom-right causal/window with an additive or boolean mask: outside cuDNN's SDPA support surface "
           "(cudnn-frontend refuses a bias with bottom-right alignment; the boolean mask is a -inf bias)";
  if (w.bottom_right && version < kCudnn9_6_0 &&
      (p.max_seqlen_q % kOldBottomRightTile != 0 || p.max_seqlen_k % kOldBottomRightTile != 0))
    return "bottom-right alignment before cuDNN 9.6.0 needs both sequence lengths a multiple of 64";
  if (w.bottom_right && w.left && version < kCudnn9_6_0 && p.max_seqlen_q != p.max_seqlen_k)
    return "a bottom-right sliding window before cuDNN 9.6.0 needs max_seqlen_q == max_seqlen_k";
  if (w.left && version < kCudnn9_10_2 && (!w.right || w.right_shift != 0 || bias))
    return "a sliding window before cuDNN 9.10.2 needs the causal right bound and no mask tensor";
  if (w.left && version == kCudnn9_14_0 && (!w.right || w.right_shift != 0) &&
      p.max_seqlen_k > kCudnn9_14_0WindowBugKeys)
    return "cuDNN 9.14.0 has a known bug with a non-causal sliding window over more than 1024 keys "
           "(cudnn-frontend refuses it)";
  return "";
}

std::string seqlen_unsupported_reason(const afz_problem& p, const int32_t* seqlens_q, const int32_t* seqlens_k) {
  for (int b = 0; b < p.batch; ++b)
    if (seqlens_k[b] == 0 && seqlens_q[b] > 0)
      return "sequence " + std::to_string(b) + " has " + std::to_string(seqlens_q[b]) +
             " queries and no key: cuDNN writes NaN to O and LSE for such rows (0 and -inf for masked rows)";
  return "";
}

}  // namespace afz::cudnn
