// PyTorch's attention backends behind the kernel ABI, each called through
// the dispatcher by its schema name (torch_ops.h) so one source serves every
// libtorch version.  What each declares (caps, precision, conventions) is
// read from PyTorch's sources; the reasons are next to the tables below and
// in README.md.  All run on the GPU: run() gets device pointers in the
// attnfuzz worker, supports() reads the host problem's shapes only.
#include "builtin_kernels.h"

#include <ATen/Context.h>
#include <torch/version.h>

#include <cstdint>
#include <limits>
#include <string>

#include "backend_models.h"
#include "messages.h"
#include "problem_run.h"
#include "torch_ops.h"
#include "torch_views.h"

namespace afz::torchk {
namespace {

enum class Kind { Flash, Efficient, Cudnn, Math, FlashVarlen };

struct Builtin final : Backend {
  Kind kind;
  NamedOp op;
  afz_align native_alignment;

  Builtin(Kind k, const char* name, afz_align a) : kind(k), op{name}, native_alignment(a) {}

  bool on_cuda() const override { return true; }
  bool packed() const override { return kind == Kind::FlashVarlen; }
  bool returns_lse() const override { return kind != Kind::Math; }
  std::string missing() const override { return op.missing(); }
  CallResult run_slice(const ProblemTensors& t, const SliceTensors& in, SliceOutputs* out) const override;
  CallResult run_packed(const ProblemTensors& t, const PackedTensors& in, PackedOutputs* out) const override;
};

}  // namespace

std::string math_precision_changed() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  if (at::globalContext().allowFP16BF16ReductionMathSDP())
    return "fp16/bf16 reductions are enabled for the math path (allow_fp16_bf16_reduction_math_sdp): "
           "the declared fp32 precision model would not hold";
#endif
  if (at::globalContext().allowTF32CuBLAS())
    return "TF32 matmuls are enabled (allow_tf32 / float32_matmul_precision): the declared fp32 precision model "
           "would not hold";
  return "";
}

namespace {

CallResult Builtin::run_slice(const ProblemTensors& t, const SliceTensors& in, SliceOutputs* out) const {
  const afz_problem& p = *t.p;
  const at::Tensor q = unit_inner_stride(in.q);
  at::Tensor k = unit_inner_stride(in.k), v = unit_inner_stride(in.v);
  std::vector<Arg> args = {{"query", q}, {"key", k}, {"value", v}, {"dropout_p", c10::IValue(0.0)},
                           {"is_causal", c10::IValue(is_causal_band(p))}, {"scale", c10::IValue(double(p.scale))}};
  switch (kind) {
    case Kind::Flash:
      args.push_back({"return_debug_mask", c10::IValue(false), false});
      break;
    case Kind::Efficient:
    case Kind::Cudnn: {
      if (kind == Kind::Efficient) {
        // Its schema has one head count for q, k and v.
        args[1].value = repeat_kv_heads(k, p.heads_q);
        args[2].value = repeat_kv_heads(v, p.heads_q);
      }
      const Bias b = additive_bias(in.bool_mask, in.add_mask, p.heads_q, q.scalar_type(), kBiasKeyAlignment);
      if (!b.inexact.empty()) return op.refuse(b.inexact);
      args.push_back({"attn_bias", b.bias.defined() ? c10::IValue(b.bias) : c10::IValue(), b.bias.defined()});
      args.push_back({"compute_log_sumexp", c10::IValue(in.want_lse)});
      if (kind == Kind::Cudnn) args.push_back({"return_debug_mask", c10::IValue(false), false});
      break;
    }
    case Kind::Math: {
      if (std::string why = math_precision_changed(); !why.empty()) return op.refuse(why);
      // An fp32 mask: the math path adds it to fp32 scores, no rounding.
      const Bias b = additive_bias(in.bool_mask, in.add_mask, p.heads_q, at::kFloat, /*key_pad=*/1);
      args.push_back({"attn_mask", b.bias.defined() ? c10::IValue(b.bias) : c10::IValue(), b.bias.defined()});
      const bool gqa = p.heads_q != p.heads_kv;
      args.push_back({"enable_gqa", c10::IValue(gqa), gqa});
      break;
    }
    case Kind::FlashVarlen:
      return op.bad_output("a packed operator has no fixed-length call");
  }
  CallResult r = op.call(args);
  if (r.status != CallResult::Ok) return r;
  if (std::string e = tensor_output(r, 0, "output", &out->o); !e.empty()) return op.bad_output(e);
  if (in.want_lse)
    if (std::string e = tensor_output(r, kLseReturn, "logsumexp", &out->lse); !e.empty()) return op.bad_output(e);
  return r;
}

CallResult Builtin::run_packed(const ProblemTensors& t, const PackedTensors& in, PackedOutputs* out) const {
  const afz_problem& p = *t.p;
  std::vector<Arg> args = flash_varlen_args(p, in.cu_seqlens_q, in.cu_seqlens_k, in.max_q, in.max_k);
  args.insert(args.end(), {{"query", in.q}, {"key", in.k}, {"value", in.v}, {"return_debug_mask", false}});
  CallResult r = op.call(args);
  if (r.status != CallResult::Ok) return r;
  if (std::string e = tensor_output(r, 0, "output", &out->o); !e.empty()) return op.bad_output(e);
  if (in.want_lse) {
    if (std::string e = tensor_output(r, kLseReturn, "softmax_logsumexp", &out->lse); !e.empty())
      return op.bad_output(e);
    // FlashAttention >= 2.5 returns the varlen LSE unpadded [Hq][total_q];
    // older versions padded it per sequence [B][Hq][max_q].
    out->lse_layout = out->lse.dim() == 3 ? PackedLse::BatchHeadsPadded : PackedLse::HeadsByTokens;
  }
  return r;
}

// supports(): what the caps cannot say.  Host problem: shapes only.
int supports(const afz_kernel* self, const afz_problem* p, char* reason, size_t len) {
  const auto& b = *static_cast<const Builtin*>(self->user);
  if (std::string why = dtype_agreement(*p, /*out_same_as_in=*/true); !why.empty()) {
    write_message(reason, len, why);
    return 1;
  }
  if (std::string why = alignment_refusal(*p, b.native_alignment, b.op.name); !why.empty()) {
    write_message(reason, len, why);
    return 1;
  }
  return 0;
}

int run(const afz_kernel* self, const afz_problem* p, char* error, size_t len) {
  return run_backend(*static_cast<const Builtin*>(self->user), p, error, len);
}

struct Entry {
  const char* name;
  const char* description;
  Builtin backend;
  afz_caps caps;
  afz_precision precision;
  afz_conventions conventions;
};

Entry* entries(size_t* count) {
  static Entry table[] = {
      {"torch.flash",
       "PyTorch aten::_scaled_dot_product_flash_attention (vendored FlashAttention-2): fp16/bf16, head_dim 8..256 "
       "step 8, causal aligned bottom-right (top-left only where seqlen_q == seqlen_k), GQA native, LSE; a ragged "
       "batch runs one sequence per call",
       Builtin(Kind::Flash, "aten::_scaled_dot_product_flash_attention", AFZ_ALIGN_BOTTOM_RIGHT),
       {kFused, kHalfTypes, kHalfTypes, kFusedMinHeadDim, kFlashMaxHeadDim, kFusedHeadDimMultiple, 0},
       kFlashPrecision, kFlashConventions},
      {"torch.efficient",
       "PyTorch aten::_scaled_dot_product_efficient_attention (CUTLASS memory-efficient): fp16/bf16, head_dim "
       "multiple of 8, head_dim_v may differ, causal top-left, boolean and additive masks as a 16-bit attn_bias "
       "(values it cannot hold are refused), GQA by repeating K/V heads (exact copy), LSE; a ragged batch runs one "
       "sequence per call",
       Builtin(Kind::Efficient, "aten::_scaled_dot_product_efficient_attention", AFZ_ALIGN_TOP_LEFT),
       {kFused | kMasks | AFZ_CAP_DV_NE_D, kHalfTypes, kHalfTypes, kFusedMinHeadDim, kNoHeadDimLimit,
        kFusedHeadDimMultiple, 0},
       kEfficientPrecision, kEfficientConventions},
      {"torch.cudnn",
       "PyTorch aten::_scaled_dot_product_cudnn_attention (cuDNN fused flash fprop): fp16/bf16, head_dim 8..256 "
       "step 8, head_dim_v may differ, causal top-left, boolean and additive masks as a 16-bit attn_bias (values "
       "it cannot hold are refused), GQA native, LSE; a ragged batch runs one sequence per call",
       Builtin(Kind::Cudnn, "aten::_scaled_dot_product_cudnn_attention", AFZ_ALIGN_TOP_LEFT),
       {kFused | kMasks | AFZ_CAP_DV_NE_D, kHalfTypes, kHalfTypes, kFusedMinHeadDim, kCudnnMaxHeadDim,
        kFusedHeadDimMultiple, 0},
       kCudnnPrecision, kCudnnConventions},
      {"torch.math",
       "PyTorch aten::_scaled_dot_product_attention_math: fp16/bf16 computed in fp32 (scores, softmax, P and P.V; "
       "O rounded once to the input dtype), fp32 too; causal top-left, masks as an fp32 attn_mask, GQA via "
       "enable_gqa, no LSE; a ragged batch runs one sequence per call",
       Builtin(Kind::Math, "aten::_scaled_dot_product_attention_math", AFZ_ALIGN_TOP_LEFT),
       {kBothAlignments | kMasks | AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D | AFZ_CAP_GPU,
        kMathTypes, kMathTypes, 1, kNoHeadDimLimit, 1, 0},
       kMathPrecision, kMathConventions},
      {"torch.flash_varlen",
       "PyTorch aten::_flash_attention_forward on packed tokens with cumulative sequence lengths (FlashAttention-2 "
       "varlen): fp16/bf16, head_dim 8..256 step 8, causal and sliding windows aligned bottom-right (top-left only "
       "where seqlen_q == seqlen_k), GQA native, zero-length sequences, LSE",
       Builtin(Kind::FlashVarlen, "aten::_flash_attention_forward", AFZ_ALIGN_BOTTOM_RIGHT),
       {kFused | AFZ_CAP_WINDOW, kHalfTypes, kHalfTypes, kFusedMinHeadDim, kFlashMaxHeadDim, kFusedHeadDimMultiple, 0},
       kFlashPrecision, kFlashConventions},
  };
  *count = sizeof table / sizeof table[0];
  return table;
}

}  // namespace

const std::vector<afz_kernel>& builtin_kernels() {
  static const std::vector<afz_kernel> kernels = [] {
    size_t n = 0;
    Entry* table = entries(&n);
    return abi_kernels<afz_kernel>(table, n, &supports, &run);
  }();
  return kernels;
}

}  // namespace afz::torchk
