// Everything a forward launch needs, resolved on the host from an afz_problem
// (which holds device pointers for GPU kernels).  Shared by host and device
// code; plain data so it is passed by value as a kernel parameter.
#pragma once
#include <cstdint>

namespace afz::cuda {

// Tile sizes: 4 warps, each owning 16 query rows; key blocks of 64.
inline constexpr int kBlockM = 64;
inline constexpr int kBlockN = 64;
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;

// Output dtype codes (afz_dtype values, repeated so device code needs no C header).
enum class OutType : int { F32 = 0, F16 = 1, BF16 = 2 };

struct ForwardParams {
  int batch, heads_q, heads_kv, head_dim;
  int max_seqlen_q, max_seqlen_k;
  const int32_t* seqlens_q;  // device, [batch]
  const int32_t* seqlens_k;
  float scale_log2;          // softmax scale * log2(e): scores go straight to exp2's domain
  int has_window, window_left, window_right, bottom_right;

  const void* q;
  const void* k;
  const void* v;
  int64_t q_stride[4], k_stride[4], v_stride[4];  // elements
  bool q_vec, k_vec, v_vec;  // 16-byte aligned rows with unit inner stride: cp.async tiles

  void* o;
  int64_t o_stride[4];
  OutType o_type;
  float* lse;                // may be null
  int64_t lse_stride[3];

  // Split-KV: key blocks [split * blocks_per_split, (split + 1) * blocks_per_split)
  // per split; partial (m, l, acc) per split in the workspace, [b][h][split][i].
  int num_splits, blocks_per_split;
  float* part_m;             // log2 domain, -inf for a split with no visible key
  float* part_l;
  float* part_acc;           // [b][h][split][i][d], unnormalized
};

}  // namespace afz::cuda
