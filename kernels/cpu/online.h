// cpu.online: the one-query online recurrence of seed 000, one query row at
// a time over blocks of keys: the tile recurrence with a tile of one row.
#pragma once
#include <stdexcept>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/online_softmax.h"

namespace afz::cpu {

struct OnlineConfig {
  int block = 128;  // keys per step
};

template <class Steps = Fa2Steps>
void online_attention(const afz_problem& p, const OnlineConfig& cfg) {
  const int d = p.head_dim, dv = p.head_dim_v, block = cfg.block;
  std::vector<float> q(d), K(int64_t(block) * d), V(int64_t(block) * dv), S(block), o(dv);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const HeadView view(p, b, h);
      for (int i = 0; i < view.seqlen_q; ++i) {
        view.load_q(i, q.data());
        TileAccumulator<float, Steps> state(1, dv);
        int64_t first, end;
        tile_key_blocks<Steps>(view, i, 1, block, &first, &end);
        for (int64_t blk = first; blk < end; ++blk) {
          const int64_t j0 = blk * block;
          const int cols = Steps::block_keys(j0, block, view.seqlen_k, p.max_seqlen_k);
          view.load_kv_rows(j0, cols, K.data(), V.data());
          view.score_tile<Steps>(i, 1, q.data(), j0, cols, K.data(), S.data());
          state.consume(S.data(), cols, V.data(), view.round_p());
        }
        float lse;
        state.finalize(o.data(), &lse);
        view.store_row(i, o.data(), lse);
      }
    }
}

template <class Steps = Fa2Steps>
int online_entry(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
  const OnlineConfig cfg = self && self->user ? *static_cast<const OnlineConfig*>(self->user) : OnlineConfig{};
  return guarded_run(p, error, error_len, [&](const afz_problem& pr) {
    if (cfg.block < 1) throw std::invalid_argument("online kernel: block must be at least 1");
    online_attention<Steps>(pr, cfg);
  });
}

}  // namespace afz::cpu
