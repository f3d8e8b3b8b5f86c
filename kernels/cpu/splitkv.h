// cpu.splitkv: split-KV (FlashDecoding).  The key blocks of each sequence are
// cut into `splits` contiguous runs, the same for every query tile; each run
// gives a partial (m, l, A) for the tile, and merge_splits combines them
// with the rescaling rule.  Short or windowed sequences leave splits empty
// (m = -inf), which is what the merge's guard is for.
#pragma once
#include <stdexcept>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/online_softmax.h"

namespace afz::cpu {

struct SplitKvConfig {
  int splits = 4;
  int br = 64;
  int bc = 64;
};

template <class Steps = Fa2Steps>
void splitkv_attention(const afz_problem& p, const SplitKvConfig& cfg) {
  const int d = p.head_dim, dv = p.head_dim_v, br = cfg.br, bc = cfg.bc;
  std::vector<float> Q(int64_t(br) * d), K(int64_t(bc) * d), V(int64_t(bc) * dv);
  std::vector<float> S(int64_t(br) * bc), O(int64_t(br) * dv), lse(br);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const HeadView view(p, b, h);
      const int64_t blocks = (int64_t(view.seqlen_k) + bc - 1) / bc;
      const int64_t per_split = std::max<int64_t>(1, (blocks + cfg.splits - 1) / cfg.splits);
      for (int i0 = 0; i0 < view.seqlen_q; i0 += br) {
        const int rows = std::min(br, view.seqlen_q - i0);
        view.load_q_rows(i0, rows, Q.data());
        int64_t first, end;
        tile_key_blocks<Steps>(view, i0, rows, bc, &first, &end);
        std::vector<TileAccumulator<float, Steps>> parts;
        parts.reserve(cfg.splits);
        for (int split = 0; split < cfg.splits; ++split) {
          auto& part = parts.emplace_back(rows, dv);
          const int64_t lo = std::max(first, split * per_split);
          const int64_t hi = std::min(end, (split + 1) * per_split);
          for (int64_t blk = lo; blk < hi; ++blk) {
            const int64_t j0 = blk * bc;
            const int cols = Steps::block_keys(j0, bc, view.seqlen_k, p.max_seqlen_k);
            view.load_kv_rows(j0, cols, K.data(), V.data());
            view.score_tile<Steps>(i0, rows, Q.data(), j0, cols, K.data(), S.data());
            part.consume(S.data(), cols, V.data(), view.round_p());
          }
        }
        merge_splits(parts, O.data(), lse.data());
        for (int r = 0; r < rows; ++r) view.store_row(i0 + r, O.data() + int64_t(r) * dv, lse[r]);
      }
    }
}

template <class Steps = Fa2Steps>
int splitkv_entry(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
  const SplitKvConfig cfg =
      self && self->user ? *static_cast<const SplitKvConfig*>(self->user) : SplitKvConfig{};
  return guarded_run(p, error, error_len, [&](const afz_problem& pr) {
    if (cfg.splits < 1 || cfg.br < 1 || cfg.bc < 1) throw std::invalid_argument("split-KV kernel: splits, Br and Bc must be at least 1");
    splitkv_attention<Steps>(pr, cfg);
  });
}

}  // namespace afz::cpu
