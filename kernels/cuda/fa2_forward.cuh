// FlashAttention-2 forward on tensor cores (mma.sync m16n8k16, fp32
// accumulation), one template for the correct kernels, the split-KV partial
// pass and the GPU mutants (Defect, defects.h).
//
// A thread block owns a tile of kBlockM = 64 query rows of one (batch, head);
// each of its 4 warps owns 16 rows and keeps, in registers, its rows' running
// max m, partial sum l and the unnormalized accumulator acc (seed 002: per-row
// vectors, diag(alpha) applied as a broadcast).  Key blocks of kBlockN = 64
// stream through shared memory:
//   S = Q K^T (tensor cores), s2 = S * scale * log2(e)  (exp2's domain)
//   m' = max(m, rowmax(s2)),  m_ref = m' or 0 where m' = -inf,
//   P = exp2(s2 - m_ref),  alpha = exp2(m - m_ref),
//   l = alpha l + rowsum(P),  acc = alpha acc + bf16(P) V  (tensor cores)
// and the division by l happens once, at the end.  P is rounded to the input
// dtype for the P.V product (the mma takes both operands in it) while l sums
// the fp32 P, as FlashAttention does.
#pragma once
#include "kernels/cuda/defects.h"
#include "kernels/cuda/forward_params.h"
#include "kernels/cuda/ptx.cuh"

namespace afz::cuda {

inline constexpr float kLn2f = 0.693147180559945309417f;
__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

template <int kD>
struct TileShape {
  static constexpr int kLd = kD + 8;  // smem row pitch: 16 bytes of padding put the 8 rows of
                                      // an ldmatrix in distinct banks
  static constexpr int kTileElems = kBlockM * kLd;
  static constexpr size_t kSmemBytes = size_t(3) * kTileElems * sizeof(uint16_t);  // Q, K, V
  static_assert(kBlockM == kBlockN, "Q, K and V tiles share one shape");
};

// Keys visible to query i: first(i) <= j < end(i), FlashAttention's alignment
// (offset = seqlen_k - seqlen_q bottom-right, 0 top-left), a negative window
// side meaning unbounded.
template <Defect kDefect>
struct Band {
  int seqlen_k, offset, left, right;

  __device__ int first(int i) const { return left < 0 ? 0 : max(0, i + offset - left); }
  // The end before clipping to seqlen_k (INT_MAX when unbounded on the right).
  __device__ int end_unclipped(int i) const {
    if (right < 0) return 0x7fffffff;
    const int slack = kDefect == Defect::CausalOffByOne ? 1 : 0;  // DEFECT: one key past the diagonal
    return i + offset + right + 1 + slack;
  }
  __device__ int end(int i) const { return min(seqlen_k, end_unclipped(i)); }
  // The end the score mask applies: a partial last block must be clipped to seqlen_k.
  __device__ int mask_end(int i) const {
    if constexpr (kDefect == Defect::PartialBlockUnmasked) return end_unclipped(i);  // DEFECT
    return end(i);
  }
};

// One 64-row tile of a [row][kD] b16 tensor into shared memory.  Rows past
// `rows` (padding past a sequence's length) are never read: they are zeroed,
// so a masked key contributes exp2(-inf) * 0 = 0 and no NaN from the poisoned
// padding ever reaches an mma.
template <int kD>
__device__ __forceinline__ void load_tile(uint16_t* s, const uint16_t* g, int64_t row_stride, int64_t col_stride,
                                          int rows, bool vec, int tid) {
  constexpr int kLd = TileShape<kD>::kLd;
  if (vec) {
    constexpr int kChunks = kD / 8;  // 16-byte chunks per row
    for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
      const int r = c / kChunks, x = (c % kChunks) * 8;
      uint16_t* dst = s + r * kLd + x;
      if (r < rows) cp_async_16(dst, g + r * row_stride + x);
      else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  } else {  // any strides: element by element
    for (int e = tid; e < kBlockM * kD; e += kThreads) {
      const int r = e / kD, x = e % kD;
      s[r * kLd + x] = r < rows ? g[r * row_stride + x * col_stride] : uint16_t(0);
    }
  }
}

// Which (head, query) a tile row holds.  The forward gives a block one head
// (group = 1: row R is query R).  The split-KV kernel packs the `group` query
// heads that share a K/V head into the rows (FlashAttention-3's PackGQA):
// row R is query R / group of head h0 + R % group, so a decode step with one
// query per head reads each K/V block once for the whole group, not once per
// query head.  Query R / group is monotone in R, so a tile's masks are still
// decided by its first and last rows.
struct RowMap {
  int group, h0;
  __device__ int head(int r) const { return h0 + r % group; }
  __device__ int query(int r) const { return r / group; }
};

// The Q tile: rows R0 .. R0 + 63 of the row map, each from its own (head,
// query); rows past `rows` (padding) are zeroed and never read.
template <int kD>
__device__ __forceinline__ void load_q_tile(uint16_t* s, const ForwardParams& p, int b, const RowMap& map, int r0,
                                            int rows, int tid) {
  constexpr int kLd = TileShape<kD>::kLd;
  const uint16_t* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0];
  auto row_ptr = [&](int r) {
    return q + map.head(r0 + r) * p.q_stride[1] + int64_t(map.query(r0 + r)) * p.q_stride[2];
  };
  if (p.q_vec) {
    constexpr int kChunks = kD / 8;
    for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
      const int r = c / kChunks, x = (c % kChunks) * 8;
      uint16_t* dst = s + r * kLd + x;
      if (r < rows) cp_async_16(dst, row_ptr(r) + x);
      else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  } else {
    for (int e = tid; e < kBlockM * kD; e += kThreads) {
      const int r = e / kD, x = e % kD;
      s[r * kLd + x] = r < rows ? row_ptr(r)[x * p.q_stride[3]] : uint16_t(0);
    }
  }
}

__device__ __forceinline__ void store_out(const ForwardParams& p, int64_t at, float v) {
  switch (p.o_type) {
    case OutType::F32: static_cast<float*>(p.o)[at] = v; break;
    case OutType::F16: static_cast<__half*>(p.o)[at] = __float2half_rn(v); break;
    case OutType::BF16: static_cast<__nv_bfloat16*>(p.o)[at] = __float2bfloat16_rn(v); break;
  }
}

template <typename Elem, int kD, Defect kDefect, bool kSplit>
__global__ void __launch_bounds__(kThreads) fa2_forward(const ForwardParams p) {
  using Shape = TileShape<kD>;
  constexpr int kLd = Shape::kLd;
  constexpr int kNTiles = kBlockN / 8;  // 8-key column tiles of S
  constexpr int kDTiles = kD / 8;       // 8-wide column tiles of acc
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* sQ = smem;
  uint16_t* sK = sQ + Shape::kTileElems;
  uint16_t* sV = sK + Shape::kTileElems;

  // Split-KV blocks pack a K/V head's query heads into their rows (RowMap).
  const int group = kSplit ? p.heads_q / p.heads_kv : 1;
  const int hk = kSplit ? int(blockIdx.y) : int(blockIdx.y) / (p.heads_q / p.heads_kv);
  const RowMap map{group, kSplit ? int(blockIdx.y) * group : int(blockIdx.y)};
  const int b = kSplit ? int(blockIdx.z) / p.num_splits : int(blockIdx.z);
  const int split = kSplit ? int(blockIdx.z) % p.num_splits : 0;
  const int seqlen_q = p.seqlens_q[b], seqlen_k = p.seqlens_k[b];
  const int rows = seqlen_q * group;  // valid tile rows of this (batch, head or head group)
  const int r0 = blockIdx.x * kBlockM;
  if (r0 >= rows) return;  // the whole tile is padding: nothing to write
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int quad_row = lane / 4, quad_col = 2 * (lane % 4);  // mma C fragment: rows g, g+8; cols 2t, 2t+1

  Band<kDefect> band{seqlen_k, p.bottom_right ? seqlen_k - seqlen_q : 0, p.has_window ? p.window_left : -1,
                     p.has_window ? p.window_right : -1};
  // Key blocks that any row of this tile can see (rows past seqlen_q are never stored).
  const int first_query = map.query(r0), last_query = map.query(min(r0 + kBlockM, rows) - 1);
  const int key_lo = band.first(first_query), key_hi = band.end(last_query);
  int n_begin = key_lo / kBlockN;
  int n_end = key_hi > key_lo ? (key_hi + kBlockN - 1) / kBlockN : n_begin;
  if constexpr (kSplit) {
    n_begin = max(n_begin, split * p.blocks_per_split);
    n_end = min(n_end, (split + 1) * p.blocks_per_split);
  }

  // Q tile -> registers (A fragments), once.
  load_q_tile<kD>(sQ, p, b, map, r0, min(kBlockM, rows - r0), tid);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[kD / 16][4];
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks)
    ldmatrix_x4(qf[ks], sQ + (warp * 16 + (lane & 15)) * kLd + ks * 16 + (lane >> 4) * 8);

  const uint16_t* gK = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1];
  const uint16_t* gV = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1];

  float acc[kDTiles][4];
#pragma unroll
  for (int t = 0; t < kDTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  // -inf: no key seen yet.  DEFECT MInitZero: rows whose scores all sit below 0
  // are referenced to 0 and underflow.
  const float m_init = kDefect == Defect::MInitZero ? 0.f : neg_inf();
  float m_run[2] = {m_init, m_init};
  float l_run[2] = {0.f, 0.f};  // this thread's share of l; the quad's four shares add up at the end

  // Loads overlap the math (FlashAttention-2's order, one buffer each): V of
  // block n streams in under S = Q K^T and the softmax, K of block n + 1
  // under P V.  cp.async groups complete in commit order: K_n, V_n, K_n+1...
  auto load_k = [&](int n) {
    const int n0 = n * kBlockN;
    load_tile<kD>(sK, gK + int64_t(n0) * p.k_stride[2], p.k_stride[2], p.k_stride[3], min(kBlockN, seqlen_k - n0),
                  p.k_vec, tid);
    cp_async_commit();
  };
  if (n_begin < n_end) load_k(n_begin);
  for (int n = n_begin; n < n_end; ++n) {
    const int n0 = n * kBlockN;
    // sV is free: every warp passed the barrier after its last P V.
    load_tile<kD>(sV, gV + int64_t(n0) * p.v_stride[2], p.v_stride[2], p.v_stride[3], min(kBlockN, seqlen_k - n0),
                  p.v_vec, tid);
    cp_async_commit();
    cp_async_wait<1>();  // K_n has landed (V_n may still be in flight)
    __syncthreads();

    float s[kNTiles][4];
#pragma unroll
    for (int t = 0; t < kNTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, sK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * kLd + ks * 16 + ((lane >> 3) & 1) * 8);
        mma_16816<Elem>(s[2 * np], qf[ks], kb[0], kb[1]);
        mma_16816<Elem>(s[2 * np + 1], qf[ks], kb[2], kb[3]);
      }
#pragma unroll
    for (int t = 0; t < kNTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][e] *= p.scale_log2;

    // Mask only blocks that straddle a band edge or seqlen_k: rows' edges are
    // monotone in the row, so the tile's first and last rows decide.
    const bool need_mask =
        n0 + kBlockN > band.mask_end(first_query) || n0 < band.first(map.query(r0 + kBlockM - 1));
    if (need_mask) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = map.query(r0 + warp * 16 + quad_row + 8 * r);
        const int lo = band.first(i), hi = band.mask_end(i);
#pragma unroll
        for (int t = 0; t < kNTiles; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = n0 + t * 8 + quad_col + e;
            if (j < lo || j >= hi) s[t][2 * r + e] = neg_inf();
          }
      }
    }

    // Online softmax, one row pair per thread; a row is spread over a quad.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = neg_inf();
#pragma unroll
      for (int t = 0; t < kNTiles; ++t) mx = fmaxf(mx, fmaxf(s[t][2 * r], s[t][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[r], mx);
      // A row with no visible key so far has m_new = -inf, and s - m_new
      // would be -inf - (-inf) = NaN; referencing it to 0 gives P = 0 and
      // alpha = 0 instead, the empty contribution.
      const float m_ref = (kDefect != Defect::NoEmptyRowGuard && m_new == neg_inf()) ? 0.f : m_new;
      const float alpha = exp2_approx(m_run[r] - m_ref);
      float row_sum = 0.f;
#pragma unroll
      for (int t = 0; t < kNTiles; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = exp2_approx(s[t][2 * r + e] - m_ref);
          s[t][2 * r + e] = pv;
          row_sum += pv;
        }
      l_run[r] = l_run[r] * alpha + row_sum;
      if constexpr (kDefect != Defect::NoAccRescale) {  // DEFECT NoAccRescale: l rescaled, acc not
#pragma unroll
        for (int t = 0; t < kDTiles; ++t) {
          acc[t][2 * r] *= alpha;
          acc[t][2 * r + 1] *= alpha;
        }
      }
      m_run[r] = m_new;
    }

    cp_async_wait<0>();
    __syncthreads();  // V_n has landed, and every warp is done reading K_n
    if (n + 1 < n_end) load_k(n + 1);
    // acc += P V: the S accumulator fragments are already laid out as the A operand.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pack_rn<Elem>(s[2 * kk][0], s[2 * kk][1]), pack_rn<Elem>(s[2 * kk][2], s[2 * kk][3]),
                             pack_rn<Elem>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_rn<Elem>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kD / 16; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + dp * 16 + (lane >> 4) * 8);
        mma_16816<Elem>(acc[2 * dp], a, vb[0], vb[1]);
        mma_16816<Elem>(acc[2 * dp + 1], a, vb[2], vb[3]);
      }
    }
    __syncthreads();  // every warp is done reading V_n before the next V load
  }

  // Epilogue: the quad's partial sums make l; then one division per element.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = r0 + warp * 16 + quad_row + 8 * r;
    if (row >= rows) continue;
    const int h = map.head(row), i = map.query(row);
    if constexpr (kSplit) {
      // Partial state of this split, merged by splitkv_merge (m = -inf, l = 0: empty split).
      const int64_t at = ((int64_t(b) * p.heads_q + h) * p.num_splits + split) * p.max_seqlen_q + i;
      if (lane % 4 == 0) {
        p.part_m[at] = m_run[r];
        p.part_l[at] = l;
      }
#pragma unroll
      for (int t = 0; t < kDTiles; ++t) {
        p.part_acc[at * kD + t * 8 + quad_col] = acc[t][2 * r];
        p.part_acc[at * kD + t * 8 + quad_col + 1] = acc[t][2 * r + 1];
      }
    } else {
      // l = 0 exactly when the row saw no key (its max key contributes
      // exp2(0) = 1 otherwise): O = 0 and LSE = -inf, not 0/0.
      const bool empty = l == 0.f;
      const int64_t base = b * p.o_stride[0] + h * p.o_stride[1] + int64_t(i) * p.o_stride[2];
#pragma unroll
      for (int t = 0; t < kDTiles; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float o = empty ? 0.f : __fdiv_rn(acc[t][2 * r + e], l);
          store_out(p, base + int64_t(t * 8 + quad_col + e) * p.o_stride[3], o);
        }
      if (p.lse && lane % 4 == 0)
        p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + int64_t(i) * p.lse_stride[2]] =
            empty ? neg_inf() : fmaf(m_run[r], kLn2f, logf(l));  // ln(sum e^s) = m ln2 + ln l
    }
  }
}

// Split-KV merge: one block per (row, head, batch), one thread per output
// element.  M = max_s m_s; each split's (l_s, acc_s) is rescaled by
// exp2(m_s - M) before the sums (DEFECT SplitMergeNoRescale: it is not).
template <int kD, bool kRescale>
__global__ void __launch_bounds__(kD) splitkv_merge(const ForwardParams p) {
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, x = threadIdx.x;
  if (i >= p.seqlens_q[b]) return;
  const int64_t row0 = (int64_t(b) * p.heads_q + h) * p.num_splits * int64_t(p.max_seqlen_q) + i;
  float m_max = neg_inf();
  for (int s = 0; s < p.num_splits; ++s) m_max = fmaxf(m_max, p.part_m[row0 + int64_t(s) * p.max_seqlen_q]);
  float l = 0.f, a = 0.f;
  // Every split empty: M = -inf and exp2(m_s - M) would be NaN; the row's O is 0.
  const bool empty = m_max == neg_inf();
  if (!empty) {
    for (int s = 0; s < p.num_splits; ++s) {
      const int64_t row = row0 + int64_t(s) * p.max_seqlen_q;
      // An empty split (m_s = -inf) gets weight exp2(-inf) = 0.
      const float w = kRescale ? exp2_approx(p.part_m[row] - m_max) : 1.f;
      l += w * p.part_l[row];
      a += w * p.part_acc[row * kD + x];
    }
  }
  const int64_t base = b * p.o_stride[0] + h * p.o_stride[1] + int64_t(i) * p.o_stride[2];
  store_out(p, base + int64_t(x) * p.o_stride[3], empty || l == 0.f ? 0.f : __fdiv_rn(a, l));
  if (p.lse && x == 0)
    p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + int64_t(i) * p.lse_stride[2]] =
        empty || l == 0.f ? neg_inf() : fmaf(m_max, kLn2f, logf(l));
}

}  // namespace afz::cuda
