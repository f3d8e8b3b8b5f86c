#include "kernels/cudnn/sdpa_graph_builder.h"

namespace afz::cudnn {

// The GEN_INDEX/CMP/BINARY_SELECT pattern of cudnn-frontend's padding mask:
// scores outside (seq_len_q, seq_len_kv) of their sequence become fill.
int64_t padding_mask(Builder& g, int64_t s, float fill) {
  const int64_t row = g.gen_index("padding.row", s, 2, CUDNN_DATA_INT32);
  const int64_t col = g.gen_index("padding.col", s, 3, CUDNN_DATA_INT32);
  const int64_t row_in = g.pointwise("padding.row<seq_len_q", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN,
                                     CUDNN_DATA_BOOLEAN, row, kUidSeqLenQ);
  const int64_t col_in = g.pointwise("padding.col<seq_len_kv", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN,
                                     CUDNN_DATA_BOOLEAN, col, kUidSeqLenKv);
  const int64_t keep =
      g.pointwise("padding.and", CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN, row_in, col_in);
  return g.pointwise("padding.select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s,
                     g.scalar_f32("padding.fill", fill), keep);
}

// Keys j <= i + off + wr stay (cudnn-frontend's right-bound diagonal band).
int64_t right_bound(Builder& g, const afz_problem& p, const Window& w, bool padded, int64_t s, float fill) {
  int64_t row = g.gen_index("right_bound.row", s, 2, CUDNN_DATA_FLOAT);
  const int64_t col = g.gen_index("right_bound.col", s, 3, CUDNN_DATA_FLOAT);
  if (w.bottom_right) {
    const int64_t skv = padded ? int64_t(kUidSeqLenKv) : g.scalar_i32("right_bound.s_kv", p.max_seqlen_k);
    row = g.pointwise("right_bound.row+s_kv", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, CUDNN_DATA_INT32, row, skv);
    const int64_t sq = padded ? int64_t(kUidSeqLenQ) : g.scalar_i32("right_bound.s_q", p.max_seqlen_q);
    row = g.pointwise("right_bound.row+s_kv-s_q", CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, CUDNN_DATA_INT32, row, sq);
  }
  if (w.right_shift != 0)
    row = g.pointwise("right_bound.row+window_right", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, CUDNN_DATA_INT32, row,
                      g.scalar_i32("right_bound.window_right", w.right_shift));
  const int64_t keep =
      g.pointwise("right_bound.row>=col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN, row, col);
  return g.pointwise("right_bound.select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s,
                     g.scalar_f32("right_bound.fill", fill), keep);
}

// Keys j with j + wl + 1 - off > i stay (cudnn-frontend's left-bound band).
// Top-left and fixed-length bottom-right fold everything into one fp32
// scalar (exact: |values| < 2^24); variable lengths go through int32.
int64_t left_bound(Builder& g, const afz_problem& p, const Window& w, bool padded, int64_t s, float fill) {
  const int64_t row = g.gen_index("left_bound.row", s, 2, CUDNN_DATA_FLOAT);
  int64_t col = g.gen_index("left_bound.col", s, 3, CUDNN_DATA_FLOAT);
  if (!w.bottom_right || !padded) {
    const int64_t shift = w.bottom_right ? int64_t(w.left_bound) - p.max_seqlen_k + p.max_seqlen_q : w.left_bound;
    col = g.pointwise("left_bound.col+window", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, col,
                      g.scalar_f32("left_bound.window", float(shift)));
  } else {
    col = g.pointwise("left_bound.col+window", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, CUDNN_DATA_INT32, col,
                      g.scalar_i32("left_bound.window", w.left_bound));
    col = g.pointwise("left_bound.col+window-s_kv", CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, CUDNN_DATA_INT32, col,
                      kUidSeqLenKv);
    col = g.pointwise("left_bound.col+window-s_kv+s_q", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, CUDNN_DATA_INT32, col,
                      kUidSeqLenQ);
  }
  const int64_t keep =
      g.pointwise("left_bound.col>row", CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN, col, row);
  return g.pointwise("left_bound.select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s,
                     g.scalar_f32("left_bound.fill", fill), keep);
}

void bind_seqlens(Builder& g, int64_t batch) {
  const Dims per_batch = {batch, 1, 1, 1}, unit = {1, 1, 1, 1};
  g.bound(Binding::SeqLenQ, kUidSeqLenQ, "seq_len_q", CUDNN_DATA_INT32, per_batch, unit);
  g.bound(Binding::SeqLenKv, kUidSeqLenKv, "seq_len_kv", CUDNN_DATA_INT32, per_batch, unit);
}

int64_t masked_scores(Builder& g, const afz_problem& p, const SdpaGraphOptions& o, int64_t q, int64_t kt,
                      int64_t scale) {
  const Dims scores = {p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k};
  const float fill = mask_fill_value(o.cudnn_version);
  const Window w = window_of(p);
  const int64_t seq_q = o.padded ? int64_t(kUidSeqLenQ) : 0, seq_kv = o.padded ? int64_t(kUidSeqLenKv) : 0;
  const int64_t raw = g.virt("bmm1.S", CUDNN_DATA_FLOAT, scores);
  g.matmul("bmm1 Q.K^T", q, kt, raw, seq_q, seq_kv, 0);
  int64_t s = g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, raw, scale);
  if (p.add_mask.data) {
    const Dims bd = broadcast_dims(p.add_mask, scores);
    g.bound(Binding::Bias, kUidBias, "bias", CUDNN_DATA_FLOAT, bd, strides_of(p.add_mask));
    s = g.pointwise("bias_add", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, s, kUidBias);
  }
  if (o.padded) s = padding_mask(g, s, fill);
  if (w.right) s = right_bound(g, p, w, o.padded, s, fill);
  if (w.left) s = left_bound(g, p, w, o.padded, s, fill);
  return s;
}

}  // namespace afz::cudnn
