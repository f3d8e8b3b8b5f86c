// The zoo's table: each row is a reference kernel's entry point instantiated
// on one defect's Steps type, with the parent's block sizes.  A new mutant is
// a Steps type in defects.h and one row here.
#include <string>
#include <vector>

#include "kernels/cpu/fa1.h"
#include "kernels/cpu/splitkv.h"
#include "kernels/cpu/tiled.h"
#include "kernels/mutants/defects.h"
#include "kernels/mutants/mutants.h"
#include "kernels/registry.h"

namespace afz {
namespace {

using namespace afz::mutants;
using cpu::emulating_kernel;

// The parents' configurations, as registered in kernels/cpu/reference_kernels.cpp
// (mutants_test checks that they still agree).
constexpr cpu::TiledConfig kTiled{64, 64};        // cpu.tiled
constexpr cpu::TiledConfig kFa1{64, 64};          // cpu.fa1
constexpr cpu::SplitKvConfig kSplitKv{4, 64, 64};  // cpu.splitkv

MutantInfo tiled(const char* name, const char* defect, const char* shows_on, cpu::RunFn run) {
  return {emulating_kernel(name, defect, run, &kTiled), "cpu.tiled", defect, shows_on};
}

const std::vector<MutantInfo>& zoo() {
  static const std::vector<MutantInfo> mutants = {
      tiled("cpu.mutant.acc_not_rescaled", "rescales l but not the accumulator",
            "a row max that grows after the first key block (late maxima)", cpu::tiled_entry<AccNotRescaled>),
      tiled("cpu.mutant.l_not_rescaled", "rescales the accumulator but not l",
            "a row max that grows after the first key block", cpu::tiled_entry<SumNotRescaled>),
      tiled("cpu.mutant.max_init_zero", "running max starts at 0 instead of -inf",
            "rows whose scores all lie below fp32's exp underflow (< -87)", cpu::tiled_entry<MaxStartsAtZero>),
      tiled("cpu.mutant.no_mref_guard", "no m_ref guard: -inf - (-inf) = NaN for rows with nothing visible yet",
            "windows or masks that empty a tile's first key block for some rows", cpu::tiled_entry<NoMRefGuard>),
      tiled("cpu.mutant.nan_fixed_at_end", "no m_ref guard; a NaN row is zeroed at the final division instead",
            "rows that see nothing in the tile's first key block but keys later (windows, key-block masks)",
            cpu::tiled_entry<NanFixedAtEnd>),
      tiled("cpu.mutant.tile_scalar_max", "one scalar max for the whole query tile",
            "rows of very different scale in one query tile", cpu::tiled_entry<OneMaxPerTile>),
      {emulating_kernel("cpu.mutant.fa1_wrong_ratio",
                        "FA1 form: normalised output rescaled by alpha instead of l alpha / l'",
                        cpu::fa1_entry<Fa1WrongRatio>, &kFa1),
       "cpu.fa1", "FA1 form: normalised output rescaled by alpha instead of l alpha / l'",
       "any row that spans two or more key blocks"},
      tiled("cpu.mutant.l_in_bf16", "running sum l rounded to bf16 after every update",
            "long flat rows (l past 256); the fp32 LSE shows it on most rows", cpu::tiled_entry<SumInBf16>),
      tiled("cpu.mutant.no_max_subtraction", "P = exp(s): no max subtraction, no rescaling",
            "scores past exp's overflow (88.7 fp32, 11.09 for fp16 P) or all below -87",
            cpu::tiled_entry<NoMaxSubtraction>),
      tiled("cpu.mutant.partial_block_unmasked", "last key block read in full, past seqlen_k into the padding",
            "varlen batches: a sequence shorter than the batch's longest, not a block multiple",
            cpu::tiled_entry<PartialBlockUnmasked>),
      tiled("cpu.mutant.causal_off_by_one", "causal / window right edge one key too far",
            "causal masks and windows with a bounded right side", cpu::tiled_entry<CausalOffByOne>),
      tiled("cpu.mutant.scale_dropped", "softmax scale never applied", "any case whose scale is not 1",
            cpu::tiled_entry<ScaleDropped>),
      tiled("cpu.mutant.lse_log2", "LSE written in log2 units", "any non-empty row whose LSE is checked",
            cpu::tiled_entry<LseInLog2>),
      tiled("cpu.mutant.exp2_no_log2e", "exp2 in place of exp without folding log2(e) into the scores",
            "any row with two different scores", cpu::tiled_entry<Exp2WithoutLog2e>),
      {emulating_kernel("cpu.mutant.splitkv_merge_unscaled", "split-KV merge adds the splits without rescaling",
                        cpu::splitkv_entry<MergeWithoutRescale>, &kSplitKv),
       "cpu.splitkv", "split-KV merge adds the splits without rescaling",
       "rows whose keys span two splits with different maxima"},
  };
  return mutants;
}

}  // namespace

const std::vector<MutantInfo>& cpu_mutants() { return zoo(); }

const MutantInfo* find_mutant(std::string_view name) {
  for (const MutantInfo& m : zoo())
    if (name == m.kernel.name) return &m;
  return nullptr;
}

void register_cpu_mutants(KernelRegistry& r) {
  for (const MutantInfo& m : zoo()) r.add(&m.kernel, std::string(kMutantOrigin));
}

}  // namespace afz
