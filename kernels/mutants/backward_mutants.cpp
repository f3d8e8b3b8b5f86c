// The backward mutant zoo's table: cpu.bwd.fa2 instantiated on one defect each.
#include "kernels/cpu/backward_kernels.h"
#include "kernels/mutants/backward_defects.h"

namespace afz {
namespace {

using namespace afz::mutants;

constexpr cpu::BwdConfig kParent{64, 64};  // cpu.bwd.fa2's

BackwardMutantInfo mutant(const char* name, const char* defect, const char* shows_on,
                          int (*run)(const afz_backward_kernel*, const afz_backward_problem*, char*, size_t),
                          bool expected_kill = true) {
  afz_backward_kernel k = cpu_backward_kernels().front();  // the parent's caps, precision, conventions
  k.name = name;
  k.description = defect;
  k.run = run;
  k.user = const_cast<cpu::BwdConfig*>(&kParent);
  return {k, defect, shows_on, expected_kill};
}

}  // namespace

const std::vector<BackwardMutantInfo>& cpu_backward_mutants() {
  static const std::vector<BackwardMutantInfo> mutants = {
      mutant("cpu.bwd.mutant.lse_log2", "LSE read as log2: P = exp2(s log2 e - LSE)", "any row whose LSE is not 0",
             cpu::fa2_backward_entry<BwdLseLog2>),
      mutant("cpu.bwd.mutant.lse_negated", "LSE with the wrong sign: P = exp(s + LSE)", "any row whose LSE is not 0",
             cpu::fa2_backward_entry<BwdLseNegated>),
      mutant("cpu.bwd.mutant.d_from_fp8_o", "D = dO . O from an unscaled e4m3 copy of O, not the O given",
             "every output dtype: 2^-4 relative error in O, 32 times bf16's rounding",
             cpu::fa2_backward_entry<BwdDFromFp8O>),
      mutant("cpu.bwd.mutant.ds_no_scale", "dQ and dK miss the softmax scale", "any case whose scale is not 1",
             cpu::fa2_backward_entry<BwdNoScaleInDs>),
      mutant("cpu.bwd.mutant.masked_score_zero", "masked scores set to 0 instead of -inf",
             "causal, window or boolean masks (exp(-LSE) overflows for LSE < -88.7)",
             cpu::fa2_backward_entry<BwdMaskedScoreZero>),
      mutant("cpu.bwd.mutant.empty_lse_unguarded", "no guard for an empty row's LSE of -inf (assumes +inf)",
             "fully masked rows: exp(-inf - (-inf)) = NaN", cpu::fa2_backward_entry<BwdEmptyLseUnguarded>),
  };
  return mutants;
}

}  // namespace afz
