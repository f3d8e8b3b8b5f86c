#include "kernels/cpu/backward_kernels.h"

#include "kernels/cpu/backward_fa2.h"
#include "kernels/cpu/backward_math.h"

namespace afz {

namespace cpu {

std::string backward_problem_error(const afz_backward_problem& bp) {
  if (!bp.fwd) return "backward problem without its forward problem";
  afz_problem p = *bp.fwd;
  p.o = bp.dq;  // problem_error checks an output tensor; the forward's o is not used here
  if (std::string why = problem_error(p); !why.empty()) return why;
  if (!bp.lse) return "backward problem: LSE is NULL";
  for (const auto& [name, t] : {std::pair{"dout", &bp.dout}, std::pair{"out", &bp.out}, std::pair{"dq", &bp.dq},
                                std::pair{"dk", &bp.dk}, std::pair{"dv", &bp.dv}}) {
    if (!t->data) return std::string(name) + " is NULL";
    if (t->dtype != AFZ_F32 && t->dtype != AFZ_F16 && t->dtype != AFZ_BF16)
      return std::string(name) + ": dtype must be fp32, fp16 or bf16";
  }
  return {};
}

}  // namespace cpu

namespace {

constexpr cpu::BwdConfig kFa2Bwd{64, 64};

afz_backward_kernel backward_kernel(const char* name, const char* description,
                                    int (*run)(const afz_backward_kernel*, const afz_backward_problem*, char*, size_t)) {
  afz_backward_kernel k{};
  k.name = name;
  k.description = description;
  k.caps = cpu::kEmulatedCaps;
  k.precision = cpu::kEmulatedPrecision;
  k.conventions = cpu::kEmulatedConventions;
  k.run = run;
  k.user = const_cast<cpu::BwdConfig*>(&kFa2Bwd);
  return k;
}

// PyTorch's math path under autograd (backward_math.h): its own fp32
// forward differentiated, so neither O nor LSE is read; no softcap or LSE
// output; gradients in the input dtype as torch returns them.
afz_backward_kernel math_backward_kernel() {
  afz_backward_kernel k = backward_kernel(
      "cpu.bwd.math",
      "PyTorch's math path differentiated by autograd, in fp32: its own forward (q, k times sqrt(scale), "
      "P normalized by its own row sum), D = rowsum(dP * P)",
      cpu::math_backward_entry);
  k.caps.flags = (k.caps.flags & ~uint32_t(AFZ_CAP_SOFTCAP | AFZ_CAP_LSE)) | AFZ_CAP_BWD_OWN_FORWARD |
                 AFZ_CAP_GRADS_IN_INPUT_DTYPE;
  k.precision = cpu::kMathBwdPrecision;
  k.user = nullptr;
  return k;
}

}  // namespace

const std::vector<afz_backward_kernel>& cpu_backward_kernels() {
  static const std::vector<afz_backward_kernel> kernels = {
      backward_kernel("cpu.bwd.fa2", "FA2 backward: P = exp(S - LSE) recomputed per block, Br = Bc = 64",
                      cpu::fa2_backward_entry<>),
      math_backward_kernel(),
  };
  return kernels;
}

const afz_backward_kernel* find_backward_kernel(std::string_view name) {
  for (const afz_backward_kernel& k : cpu_backward_kernels())
    if (name == k.name) return &k;
  for (const BackwardMutantInfo& m : cpu_backward_mutants())
    if (name == m.kernel.name) return &m.kernel;
  return nullptr;
}

}  // namespace afz
