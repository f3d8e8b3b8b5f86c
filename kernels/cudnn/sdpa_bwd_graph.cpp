#include "kernels/cudnn/sdpa_bwd_graph.h"

#include <stdexcept>

#include "kernels/cudnn/sdpa_graph_builder.h"

namespace afz::cudnn {
namespace {

// The last two axes swapped: a matrix read transposed.
Dims swap_last(Dims d) {
  std::swap(d[2], d[3]);
  return d;
}

// dK or dV: straight into the bound gradient when every query head has its
// own KV head; under GQA/MQA per query head (in the input dtype, as
// cudnn-frontend declares it) and then summed over each KV head's group.
void grad_into(Builder& g, const std::string& name, int64_t a, int64_t b, int64_t grad, const Dims& per_q_head,
               bool grouped, cudnnDataType_t io, int64_t m, int64_t k) {
  if (!grouped) {
    g.matmul(name, a, b, grad, m, 0, k);
    return;
  }
  const int64_t per_head = g.virt(name + ".per_q_head", io, per_q_head);
  g.matmul(name, a, b, per_head, m, 0, k);
  g.reduce_to(name + ".sum_over_group", CUDNN_REDUCE_TENSOR_ADD, per_head, grad);
}

}  // namespace

Dims dense_strides(const Dims& dims) { return packed_strides(dims); }

SdpaGraph build_sdpa_bwd_graph(const afz_problem& p, const SdpaGraphOptions& o, afz_dtype o_dtype) {
  if (p.bool_mask.data)
    throw std::invalid_argument("sdpa backward graph: the boolean mask reaches cuDNN as the bias (merge_masks)");
  Builder g(p, o);
  const int64_t b = p.batch, hq = p.heads_q, hk = p.heads_kv, sq = p.max_seqlen_q, skv = p.max_seqlen_k;
  const int64_t d = p.head_dim, dv = p.head_dim_v;
  const cudnnDataType_t io = io_type(p.q.dtype);
  const Dims scores = {b, hq, sq, skv};
  const float fill = mask_fill_value(o.cudnn_version);
  const bool grouped = hq != hk;

  const int64_t q = g.bound(Binding::Q, kUidQ, "Q", io, {b, hq, sq, d}, strides_of(p.q));
  const Dims k_dims = {b, hk, skv, d}, v_dims = {b, hk, skv, dv};
  const Dims ks = normalized_strides(k_dims, strides_of(p.k)), vs = normalized_strides(v_dims, strides_of(p.v));
  const int64_t kt = g.bound(Binding::K, kUidK, "K^T", io, swap_last(k_dims), swap_last(ks));
  const int64_t vt = g.bound(Binding::V, kUidV, "V^T", io, swap_last(v_dims), swap_last(vs));
  const Dims o_dims = {b, hq, sq, dv}, rows = {b, hq, sq, 1};
  const int64_t out = g.bound(Binding::O, kUidO, "O", o_dtype == AFZ_F32 ? CUDNN_DATA_FLOAT : io, o_dims,
                              dense_strides(o_dims));
  const int64_t dout = g.bound(Binding::DO, kUidDO, "dO", io, o_dims, dense_strides(o_dims));
  const int64_t stats = g.bound(Binding::Stats, kUidStats, "Stats", CUDNN_DATA_FLOAT, rows, dense_strides(rows));
  if (o.padded) bind_seqlens(g, b);
  const int64_t seq_q = o.padded ? int64_t(kUidSeqLenQ) : 0, seq_kv = o.padded ? int64_t(kUidSeqLenKv) : 0;
  const Dims q_dims = {b, hq, sq, d};
  const int64_t dq = g.bound(Binding::DQ, kUidDQ, "dQ", io, q_dims, dense_strides(q_dims));
  const int64_t dk = g.bound(Binding::DK, kUidDK, "dK", io, k_dims, dense_strides(k_dims));
  const int64_t dvv = g.bound(Binding::DV, kUidDV, "dV", io, v_dims, dense_strides(v_dims));
  // A non-virtual fp32 accumulator is how the backend API is told to sum dQ
  // across key blocks in memory (cudnn-frontend's default from cuDNN 9.0).
  const int64_t dq_acc = g.bound(Binding::DQAccum, kUidDQAccum, "dQ_accum", CUDNN_DATA_FLOAT, q_dims,
                                 dense_strides(q_dims));
  g.last_tensor().reorder_f16x16 = true;
  // The no-dropout scale of cudnn-frontend's pattern: one by-value 1.0 serves both of its uses.
  const int64_t one = g.scalar_f32("one", 1.0f);
  const int64_t scale = g.scalar_f32("attn_scale.scale", p.scale);

  // D = rowsum(dO * O), in fp32.
  const int64_t do_o = g.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, dout, out);
  const int64_t row_sum = g.reduce_keys("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, do_o);
  const int64_t dsum =
      g.pointwise("softmax_sum", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, row_sum, one);

  // P = exp(S - Stats), S as the forward computes and masks it.
  int64_t s = masked_scores(g, p, o, q, kt, scale);
  s = g.pointwise("sub_stats", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s, stats);
  // cudnn-frontend re-applies the padding mask after the stats are loaded
  // (its work-around for a cuDNN >= 9.0 bug): padded rows' stats are not
  // the rows' own, and S - Stats there must not give a non-zero P.
  if (o.padded) s = padding_mask(g, s, fill);
  const int64_t prob = g.pointwise("exp_s", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s);

  // dV = P^T dO, P^T rounded to the input dtype (the GEMM's operand).
  const Dims transposed = {b, hq, skv, sq};
  const int64_t p_t = g.reshape("reshape_P", prob, transposed, swap_last(dense_strides(scores)), io);
  grad_into(g, "bmm dV = P^T.dO", p_t, dout, dvv, {b, hq, skv, dv}, grouped, io, seq_kv, seq_q);

  // dS = P (dP - D) scale, dP = dO V^T.
  const int64_t dp = g.virt("bmm dP.out", CUDNN_DATA_FLOAT, scores);
  g.matmul("bmm dP = dO.V^T", dout, vt, dp, seq_q, seq_kv, 0);
  int64_t ds = g.pointwise("dP_dropout_mask", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, dp, one);
  ds = g.pointwise("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, ds, dsum);
  ds = g.pointwise("mul_dP_exp_s", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, ds, prob);
  ds = g.pointwise("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, ds, scale);

  // dK = dS^T Q, dS^T rounded to the input dtype.
  const int64_t ds_t = g.reshape("reshape_dS", ds, transposed, swap_last(dense_strides(scores)), io);
  grad_into(g, "bmm dK = dS^T.Q", ds_t, q, dk, {b, hq, skv, d}, grouped, io, seq_kv, seq_q);

  // dQ = dS K through the fp32 accumulator.
  const int64_t k = g.reshape("reshape_K", kt, k_dims, ks, io);
  g.matmul("bmm dQ = dS.K", ds, k, dq_acc, seq_q, 0, seq_kv);
  g.pointwise_to("identity_dQ", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_acc, 0, 0, dq);
  return g.take();
}

}  // namespace afz::cudnn
