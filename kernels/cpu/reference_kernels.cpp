// The built-in CPU reference kernels: the table of names, forms and block
// sizes.  Each emulates tensor-core precision exactly (see common.h) and
// must pass every case.
#include <vector>

#include "kernels/cpu/direct.h"
#include "kernels/cpu/fa1.h"
#include "kernels/cpu/online.h"
#include "kernels/cpu/splitkv.h"
#include "kernels/cpu/tiled.h"
#include "kernels/registry.h"

namespace afz {
namespace {

using namespace afz::cpu;

constexpr OnlineConfig kOnline{128};
constexpr TiledConfig kTiled{64, 64};
constexpr TiledConfig kTiledTall{128, 32};
constexpr TiledConfig kTiledSmall{16, 16};
constexpr TiledConfig kFa1{64, 64};
constexpr SplitKvConfig kSplitKv{4, 64, 64};
constexpr SplitKvConfig kSplitKvSmall{16, 16, 16};

const std::vector<afz_kernel>& reference_kernels() {
  static const std::vector<afz_kernel> kernels = {
      emulating_kernel("cpu.direct", "two-pass softmax per row: max, then exp-sum and P.V",
                       direct_entry<>, nullptr),
      emulating_kernel("cpu.online", "one-query online recurrence (seed 000), blocks of 128 keys",
                       online_entry<>, &kOnline),
      emulating_kernel("cpu.tiled", "FA2 tiled recurrence (seed 002), Br = 64, Bc = 64",
                       tiled_entry<>, &kTiled),
      emulating_kernel("cpu.tiled.br128_bc32", "FA2 tiled recurrence, Br = 128, Bc = 32",
                       tiled_entry<>, &kTiledTall),
      emulating_kernel("cpu.tiled.br16_bc16",
                       "FA2 tiled recurrence, Br = 16, Bc = 16 (many blocks on small cases)",
                       tiled_entry<>, &kTiledSmall),
      emulating_kernel("cpu.fa1", "FA1 form: output normalised every block, Br = 64, Bc = 64",
                       fa1_entry<>, &kFa1),
      emulating_kernel("cpu.splitkv", "split-KV: 4 key splits merged by rescaling, Br = Bc = 64",
                       splitkv_entry<>, &kSplitKv),
      emulating_kernel("cpu.splitkv.s16_bc16",
                       "split-KV: 16 key splits of 16-key blocks (empty splits on short rows)",
                       splitkv_entry<>, &kSplitKvSmall),
  };
  return kernels;
}

}  // namespace

void register_cpu_reference_kernels(KernelRegistry& r) {
  const auto& kernels = reference_kernels();
  r.add_all(kernels.data(), int(kernels.size()), "builtin");
}

}  // namespace afz
