#include "harness/case/tensor_views.h"

#include <algorithm>
#include <stdexcept>

namespace afz {

View dense_view(Layout layout, int heads, int seq, int row) {
  View v;
  if (layout == Layout::BSHD) {
    v.stride[0] = int64_t(seq) * heads * row, v.stride[1] = row, v.stride[2] = int64_t(heads) * row, v.stride[3] = 1;
  } else {
    v.stride[0] = int64_t(heads) * seq * row, v.stride[1] = int64_t(seq) * row, v.stride[2] = row, v.stride[3] = 1;
  }
  return v;
}

TensorViews tensor_views(const Case& c) {
  TensorViews t;
  const int sq = c.max_seqlen_q(), sk = c.max_seqlen_k();
  const int row = c.head_dim + c.row_gap, row_v = c.head_dim_v + c.row_gap;
  if (c.layout == Layout::PackedQKV) {
    if (c.head_dim != c.head_dim_v) throw std::runtime_error("layout: packed_qkv needs head_dim == head_dim_v");
    if (c.kv_broadcast != KvBroadcast::None) throw std::runtime_error("kv_broadcast: not possible with packed_qkv");
    // One buffer [b][s][heads_q + 2 heads_kv][row]: Q's heads, then K's, then V's.
    const int s = std::max(sq, sk), heads = c.heads_q + 2 * c.heads_kv;
    t.q = t.k = t.v = dense_view(Layout::BSHD, heads, s, row);
    t.k.offset = int64_t(c.heads_q) * row;
    t.v.offset = int64_t(c.heads_q + c.heads_kv) * row;
    t.packed_elements = int64_t(c.batch) * s * heads * row;
    t.q_extent = t.kv_extent = s;
    t.kv_batch_slots = c.batch;
    t.kv_head_slots = c.heads_kv;
  } else {
    const int kv_heads = c.kv_broadcast == KvBroadcast::Heads ? 1 : c.heads_kv;
    const int kv_batch = c.kv_broadcast == KvBroadcast::Batch ? 1 : c.batch;
    t.q = dense_view(c.layout, c.heads_q, sq, row);
    t.k = dense_view(c.layout, kv_heads, sk, row);
    t.v = dense_view(c.layout, kv_heads, sk, row_v);
    // Broadcast K and V: every head (or sequence) reads the one stored copy.
    if (c.kv_broadcast == KvBroadcast::Heads) t.k.stride[1] = t.v.stride[1] = 0;
    if (c.kv_broadcast == KvBroadcast::Batch) t.k.stride[0] = t.v.stride[0] = 0;
    t.q_elements = int64_t(c.batch) * c.heads_q * sq * row;
    t.k_elements = int64_t(kv_batch) * kv_heads * sk * row;
    t.v_elements = int64_t(kv_batch) * kv_heads * sk * row_v;
    t.q_extent = sq;
    t.kv_extent = sk;
    t.kv_batch_slots = kv_batch;
    t.kv_head_slots = kv_heads;
  }
  // O in Q's layout (row gaps included; packed QKV writes a BSHD O), LSE dense [b][h][i].
  const Layout o_layout = c.layout == Layout::BSHD || c.layout == Layout::PackedQKV ? Layout::BSHD : Layout::BHSD;
  t.o = dense_view(o_layout, c.heads_q, sq, row_v);
  t.o_elements = int64_t(c.batch) * c.heads_q * sq * row_v;
  t.lse_stride[0] = int64_t(c.heads_q) * sq;
  t.lse_stride[1] = sq;
  t.lse_stride[2] = 1;
  t.lse_elements = int64_t(c.batch) * c.heads_q * sq;
  return t;
}

}  // namespace afz
