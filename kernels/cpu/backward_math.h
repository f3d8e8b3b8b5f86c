// cpu.bwd.math: PyTorch's math attention path differentiated by autograd
// (aten::_scaled_dot_product_attention_math under torch.autograd.grad, as the
// torch.math [bwd] adapter runs it), emulated in fp32 op by op.  It reads
// neither the O nor the LSE it is given: like autograd, it recomputes its own
// forward and differentiates that (AFZ_CAP_BWD_OWN_FORWARD):
//
//   sf = fp32(sqrt(|scale|))           the double sqrt cast to the mul kernel's fp32
//   qs = q * (+-sf),  kt = k * sf      q and k each scaled (the sign on q)
//   S  = qs kt^T + add_mask            fp32 GEMM (key order here), fp32 add; masked: -inf
//   P  = exp(S - m) / sum              _safe_softmax: m the row max, a row of -inf gives 0
//   dP = dO V^T,  D = rowsum(dP * P)   _softmax_backward_data: dS = P (dP - D)
//   dV = P^T dO
//   dQ = (dS kt) * (+-sf),  dK = (dS^T qs) * sf
//   GQA: each query head's dK, dV (fp32) summed over its group, as
//   repeat_interleave's backward does; gradients rounded once to the input
//   dtype (the backward of q.to(fp32)).
//
// fp16 / bf16 inputs are converted to fp32 first (exactly), as the math path
// does by default.  No softcap (the math path has none).
#pragma once
#include <cstddef>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz::cpu {

// glibc's expf (within 1 ulp) and the division by the row sum (half an ulp).
inline constexpr afz_precision kMathBwdPrecision = {AFZ_F32, AFZ_F32, AFZ_F32, /*exp_ulps=*/2.0f,
                                                    /*flush_subnormals=*/0, /*l_from_unrounded_p=*/1};

int math_backward_entry(const afz_backward_kernel* self, const afz_backward_problem* bp, char* error,
                        size_t error_len);

}  // namespace afz::cpu
