// cpu.fa1: the FlashAttention-1 form.  Same tiles and statistics as
// cpu.tiled, but the output stays normalised: every block rescales it by
// l alpha / l' and adds P V / l' (NormalisedTile).  Each block adds an fp32
// rounding of O, so over many blocks its error grows with the block count.
#pragma once
#include <stdexcept>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/online_softmax.h"
#include "kernels/cpu/tiled.h"

namespace afz::cpu {

template <class Steps = Fa2Steps>
void fa1_attention(const afz_problem& p, const TiledConfig& cfg) {
  const int d = p.head_dim, dv = p.head_dim_v, br = cfg.br, bc = cfg.bc;
  std::vector<float> Q(int64_t(br) * d), K(int64_t(bc) * d), V(int64_t(bc) * dv);
  std::vector<float> S(int64_t(br) * bc), O(int64_t(br) * dv), lse(br);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const HeadView view(p, b, h);
      for (int i0 = 0; i0 < view.seqlen_q; i0 += br) {
        const int rows = std::min(br, view.seqlen_q - i0);
        view.load_q_rows(i0, rows, Q.data());
        NormalisedTile<float, Steps> tile(rows, dv);
        int64_t first, end;
        tile_key_blocks<Steps>(view, i0, rows, bc, &first, &end);
        for (int64_t blk = first; blk < end; ++blk) {
          const int64_t j0 = blk * bc;
          const int cols = Steps::block_keys(j0, bc, view.seqlen_k, p.max_seqlen_k);
          view.load_kv_rows(j0, cols, K.data(), V.data());
          view.score_tile<Steps>(i0, rows, Q.data(), j0, cols, K.data(), S.data());
          tile.consume(S.data(), cols, V.data(), view.round_p());
        }
        tile.finalize(O.data(), lse.data());
        for (int r = 0; r < rows; ++r) view.store_row(i0 + r, O.data() + int64_t(r) * dv, lse[r]);
      }
    }
}

template <class Steps = Fa2Steps>
int fa1_entry(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
  const TiledConfig cfg = self && self->user ? *static_cast<const TiledConfig*>(self->user) : TiledConfig{};
  return guarded_run(p, error, error_len, [&](const afz_problem& pr) {
    if (cfg.br < 1 || cfg.bc < 1) throw std::invalid_argument("FA1 kernel: Br and Bc must be at least 1");
    fa1_attention<Steps>(pr, cfg);
  });
}

}  // namespace afz::cpu
