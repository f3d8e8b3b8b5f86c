// Split-KV (FlashDecoding): the forward's partial pass over each split's key
// blocks, then the merge; and the split plan.
#include <algorithm>

#include "kernels/cuda/fa2_launch.cuh"
#include "kernels/cuda/launch.h"

namespace afz::cuda {

namespace {
constexpr int kWavesPerSm = 2;     // blocks per SM the splits aim to fill
constexpr int kMaxSplits = 128;
constexpr int kMaxGridZ = 65535;   // batch * splits rides on gridDim.z
}  // namespace

// Enough splits to put kWavesPerSm blocks on every SM when the query tiles
// alone do not (one or a few queries over a long cache), never more splits
// than key blocks.  Small problems end with one key block per split, so the
// merge runs on most cases a campaign draws.
SplitPlan plan_splits(const ForwardParams& p, int sm_count) {
  SplitPlan plan;
  const int key_blocks = std::max(1, ceil_div(p.max_seqlen_k, kBlockN));
  const int group = p.heads_q / p.heads_kv;  // query heads packed into one block's rows
  const long query_blocks = long(std::max(1, ceil_div(p.max_seqlen_q * group, kBlockM))) * p.heads_kv * p.batch;
  const long wanted = (long(kWavesPerSm) * sm_count + query_blocks - 1) / query_blocks;
  int splits = int(std::clamp<long>(wanted, 1, std::min({key_blocks, kMaxSplits, kMaxGridZ / p.batch})));
  plan.blocks_per_split = ceil_div(key_blocks, splits);
  plan.num_splits = ceil_div(key_blocks, plan.blocks_per_split);
  plan.workspace_floats = size_t(p.batch) * p.heads_q * plan.num_splits * size_t(p.max_seqlen_q) * (p.head_dim + 2);
  return plan;
}

cudaError_t launch_splitkv_bf16(const ForwardParams& p, bool rescale_in_merge, cudaStream_t stream) {
  return launch_splitkv_typed<__nv_bfloat16>(p, rescale_in_merge, stream);
}
cudaError_t launch_splitkv_f16(const ForwardParams& p, bool rescale_in_merge, cudaStream_t stream) {
  return launch_splitkv_typed<__half>(p, rescale_in_merge, stream);
}

}  // namespace afz::cuda
