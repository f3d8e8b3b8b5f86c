// PyTorch's attention backward operators behind the backward ABI, called
// through the dispatcher by schema name like the forward adapters.  Each gets
// the O and LSE the harness gives (the exact forward's, O in the input dtype)
// with the empty rows' LSE rewritten to what the library's own forward writes
// there, since its backward is built to read that.
#include "backward_kernels.h"

#include <torch/csrc/autograd/autograd.h>

#include <string>

#include "backend_models.h"
#include "backward_run.h"
#include "messages.h"
#include "problem_run.h"
#include "torch_ops.h"
#include "torch_views.h"

namespace afz::torchk {
namespace {

enum class Kind { Flash, Efficient, Cudnn, Math, FlashVarlen };

// The memory-efficient forward returns its LSE with the query dimension
// padded to a multiple of 32 (kAlignLSE), and its backward reads it in
// that layout: we hand it the same.
constexpr int64_t kEfficientLseAlignment = 32;
// (grad_query, grad_key, grad_value[, grad_bias]) in every fused schema.
constexpr size_t kGradQ = 0, kGradK = 1, kGradV = 2;

// Without dropout the forward operators hand back philox seed and offset
// tensors their backward never reads: empty host scalars from FlashAttention
// and the memory-efficient kernel; cuDNN's backward checks that every tensor
// is on the inputs' device, so it gets device ones.
at::Tensor no_philox() { return at::empty({}, at::TensorOptions().dtype(at::kLong)); }
// aten::_flash_attention_backward names these two (philox_seed,
// philox_offset) in some versions and (rng_state, unused) in later ones,
// the same tensors in the same places: both spellings, neither required,
// so the schema picks the one it has (Op::call fails on a schema with
// neither: "no value for argument ...").
std::vector<Arg> flash_no_philox() {
  std::vector<Arg> args;
  for (const char* name : {"philox_seed", "philox_offset", "rng_state", "unused"})
    args.push_back({name, no_philox(), /*required=*/false});
  return args;
}
at::Tensor no_philox_on(at::Device device) { return at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(device)); }
// [n][H][s][d] with the memory layout the memory-efficient forward gives its
// output ([n][s][H][d] contiguous, viewed as [n][H][s][d]): an exact copy.
// Its backward reads O with dO's strides after making dO contiguous in that
// layout (seen on the H200: dQ, dK off by up to 383 x the bound, dV right,
// when O came in [n][H][s][d] memory), so both get that layout.
at::Tensor in_forward_layout(const at::Tensor& t) { return t.transpose(1, 2).contiguous().transpose(1, 2); }

struct BackwardBuiltin final : BackwardBackend {
  Kind kind;
  NamedOp op;
  afz_align native_alignment;
  afz_empty_lse forward_empty_lse;  // what the library's forward writes for an empty row

  BackwardBuiltin(Kind k, const char* name, afz_align a, afz_empty_lse e)
      : kind(k), op{name}, native_alignment(a), forward_empty_lse(e) {}

  std::string missing() const override { return op.missing(); }
  bool needs_autograd() const override { return kind == Kind::Math; }
  bool packed() const override { return kind == Kind::FlashVarlen; }
  CallResult run_slice(const BackwardTensors& t, const BackwardSlice& in, SliceGrads* out) const override;
  CallResult run_packed(const BackwardTensors& t, const PackedBackward& in, PackedGrads* out) const override;

 private:
  // SliceGrads or PackedGrads: dq, dk, dv from the schema's first three returns.
  template <class Grads>
  CallResult grads_from(const CallResult& r, Grads* out) const {
    if (std::string e = tensor_output(r, kGradQ, "grad_query", &out->dq); !e.empty()) return op.bad_output(e);
    if (std::string e = tensor_output(r, kGradK, "grad_key", &out->dk); !e.empty()) return op.bad_output(e);
    if (std::string e = tensor_output(r, kGradV, "grad_value", &out->dv); !e.empty()) return op.bad_output(e);
    return r;
  }
  CallResult run_math(const BackwardTensors& t, const BackwardSlice& in, SliceGrads* out) const;
};

CallResult BackwardBuiltin::run_slice(const BackwardTensors& t, const BackwardSlice& in, SliceGrads* out) const {
  if (kind == Kind::Math) return run_math(t, in, out);
  const afz_problem& p = *t.p;
  const at::Tensor q = unit_inner_stride(in.q), k = unit_inner_stride(in.k), v = unit_inner_stride(in.v);
  const at::Tensor dout = unit_inner_stride(in.dout), o = unit_inner_stride(in.out);
  const at::Tensor lse = lse_in_convention(in.lse, forward_empty_lse).contiguous();
  const double scale = double(p.scale);
  const bool causal = is_causal_band(p);
  std::vector<Arg> args;
  switch (kind) {
    case Kind::Flash:
      args = {{"grad_out", dout},           {"query", q},
              {"key", k},                   {"value", v},
              {"out", o},                   {"logsumexp", lse},
              {"cum_seq_q", at::Tensor()},  {"cum_seq_k", at::Tensor()},
              {"max_q", c10::IValue(in.sq)}, {"max_k", c10::IValue(in.sk)},
              {"dropout_p", c10::IValue(0.0)}, {"is_causal", c10::IValue(causal)},
              {"philox_seed", no_philox()}, {"philox_offset", no_philox()},
              {"scale", c10::IValue(scale)}};
      break;
    case Kind::Efficient: {
      const Bias b = additive_bias(in.bool_mask, in.add_mask, p.heads_q, q.scalar_type(), kBiasKeyAlignment);
      if (!b.inexact.empty()) return op.refuse(b.inexact);
      // [n][Hq][sq] -> [n][Hq][sq rounded up to 32], the forward's layout;
      // the padding rows are no query's and stay 0.
      const int64_t padded = (in.sq + kEfficientLseAlignment - 1) / kEfficientLseAlignment * kEfficientLseAlignment;
      at::Tensor lse_padded = at::zeros({lse.size(0), lse.size(1), padded}, lse.options());
      lse_padded.narrow(2, 0, in.sq).copy_(lse);
      args = {{"grad_out_", in_forward_layout(dout)},
              {"query", q},
              {"key", k},
              {"value", v},
              {"attn_bias", b.bias.defined() ? c10::IValue(b.bias) : c10::IValue(at::Tensor())},
              {"out", in_forward_layout(o)},
              {"logsumexp", lse_padded},
              {"philox_seed", no_philox()},
              {"philox_offset", no_philox()},
              {"dropout_p", c10::IValue(0.0)},
              {"grad_input_mask", c10::IValue(c10::List<bool>({true, true, true, false}))},
              {"is_causal", c10::IValue(causal)},
              {"scale", c10::IValue(scale)}};
      break;
    }
    case Kind::Cudnn: {
      const Bias b = additive_bias(in.bool_mask, in.add_mask, p.heads_q, q.scalar_type(), kBiasKeyAlignment);
      if (!b.inexact.empty()) return op.refuse(b.inexact);
      args = {{"grad_out", dout},
              {"query", q},
              {"key", k},
              {"value", v},
              {"out", o},
              // cuDNN's forward returns its statistics as [n][Hq][sq][1].
              {"logsumexp", lse.unsqueeze(-1).contiguous()},
              {"philox_seed", no_philox_on(q.device())},
              {"philox_offset", no_philox_on(q.device())},
              {"attn_bias", b.bias.defined() ? c10::IValue(b.bias) : c10::IValue(at::Tensor())},
              {"cum_seq_q", at::Tensor()},
              {"cum_seq_k", at::Tensor()},
              {"max_q", c10::IValue(in.sq)},
              {"max_k", c10::IValue(in.sk)},
              {"dropout_p", c10::IValue(0.0)},
              {"is_causal", c10::IValue(causal)},
              {"scale", c10::IValue(scale)}};
      break;
    }
    case Kind::Math: break;
    case Kind::FlashVarlen: return op.bad_output("a packed operator has no fixed-length call");
  }
  const CallResult r = op.call(args);
  if (r.status != CallResult::Ok) return r;
  return grads_from(r, out);
}

// FlashAttention-2's varlen backward (mha_varlen_bwd) on the packed batch,
// as aten::_flash_attention_backward calls it when cum_seq_q is defined;
// the lengths and the band as the forward adapter passes them.
CallResult BackwardBuiltin::run_packed(const BackwardTensors& t, const PackedBackward& in, PackedGrads* out) const {
  std::vector<Arg> args = flash_varlen_args(*t.p, in.cu_seqlens_q, in.cu_seqlens_k, in.max_q, in.max_k);
  args.insert(args.end(), {{"grad_out", in.dout},
                           {"query", in.q},
                           {"key", in.k},
                           {"value", in.v},
                           {"out", in.out},
                           {"logsumexp", lse_in_convention(in.lse, forward_empty_lse).contiguous()}});
  const std::vector<Arg> philox = flash_no_philox();
  args.insert(args.end(), philox.begin(), philox.end());
  const CallResult r = op.call(args);
  if (r.status != CallResult::Ok) return r;
  return grads_from(r, out);
}

// The math path has no backward operator of its own: PyTorch differentiates
// its composite forward with autograd, and so do we (the O and LSE given are
// not used; its backward recomputes P from its own fp32 forward).
CallResult BackwardBuiltin::run_math(const BackwardTensors& t, const BackwardSlice& in, SliceGrads* out) const {
  if (std::string why = math_precision_changed(); !why.empty()) return op.refuse(why);
  const afz_problem& p = *t.p;
  // Leaves of the graph: exact copies of the inputs.
  const at::Tensor q = in.q.detach().clone().requires_grad_(true);
  const at::Tensor k = in.k.detach().clone().requires_grad_(true);
  const at::Tensor v = in.v.detach().clone().requires_grad_(true);
  const Bias b = additive_bias(in.bool_mask, in.add_mask, p.heads_q, at::kFloat, /*key_pad=*/1);
  const bool gqa = p.heads_q != p.heads_kv;
  const CallResult r = op.call({{"query", q},
                             {"key", k},
                             {"value", v},
                             {"attn_mask", b.bias.defined() ? c10::IValue(b.bias) : c10::IValue(), b.bias.defined()},
                             {"dropout_p", c10::IValue(0.0)},
                             {"is_causal", c10::IValue(is_causal_band(p))},
                             {"scale", c10::IValue(double(p.scale))},
                             {"enable_gqa", c10::IValue(gqa), gqa}});
  if (r.status != CallResult::Ok) return r;
  at::Tensor o;
  if (std::string e = tensor_output(r, 0, "output", &o); !e.empty()) return op.bad_output(e);
  const torch::autograd::variable_list g = torch::autograd::grad({o}, {q, k, v}, {in.dout.contiguous()});
  out->dq = g[kGradQ];
  out->dk = g[kGradK];
  out->dv = g[kGradV];
  return r;
}

// supports(): what the caps cannot say.  Host problem: shapes only.
int supports(const afz_backward_kernel* self, const afz_backward_problem* bp, char* reason, size_t len) {
  const auto& b = *static_cast<const BackwardBuiltin*>(self->user);
  const afz_problem& p = *bp->fwd;
  std::string why = dtype_agreement(p, /*out_same_as_in=*/false);
  if (why.empty() && bp->out.dtype != p.q.dtype)
    why = std::string("the operator takes O in its input dtype (") + dtype_label(p.q.dtype) + "), not " +
          dtype_label(bp->out.dtype);
  if (why.empty()) why = alignment_refusal(p, b.native_alignment, b.op.name);
  // GQA: FlashAttention-2 (flash, flash_varlen) and cuDNN take fewer K/V
  // heads natively; FlashAttention-2 writes each query head's dK, dV in the
  // input dtype and sums the group (flash_api.cpp, mha_bwd and
  // mha_varlen_bwd: dk_expanded, at::sum_out), the per-head rounding the
  // bound charges a kernel declaring AFZ_CAP_GRADS_IN_INPUT_DTYPE.  The
  // memory-efficient backward takes one head count for q, k and v
  // (_efficient_attention_backward checks query.size(2) == key.size(2)) and
  // sdpa never sends it GQA (sdp_utils.cpp: check_batch_size_and_num_heads_dense
  // <false>): the K/V heads would be repeated and dK, dV summed by this
  // adapter, which is not the library under test.
  if (why.empty() && p.heads_q != p.heads_kv && b.kind == Kind::Efficient)
    why = std::string(b.op.name) + " takes one head count for q, k and v: a grouped-query dK, dV would be summed "
          "by the adapter, not by the library";
  if (why.empty()) return 0;
  write_message(reason, len, why);
  return 1;
}

int run(const afz_backward_kernel* self, const afz_backward_problem* p, char* error, size_t len) {
  return run_backward_backend(*static_cast<const BackwardBuiltin*>(self->user), p, error, len);
}

// The backward operators accumulate dQ with atomics across key blocks
// (FlashAttention-2's dq_accum, the memory-efficient kernel's split keys,
// cuDNN's dQ reduction) unless torch's deterministic mode is on, which the
// adapters leave alone: their reruns may differ in the last bits.
constexpr uint32_t kFusedBackward = AFZ_CAP_NONDETERMINISTIC | AFZ_CAP_GRADS_IN_INPUT_DTYPE;
// What each backward takes: the forward's caps less the LSE output (the
// backward reads one) and less what the wrapper cannot give it (varlen by
// sequence is kept: one call per sequence, as forward).
constexpr uint32_t backward_caps(uint32_t forward) { return forward & ~uint32_t(AFZ_CAP_LSE); }

struct Entry {
  const char* name;
  const char* description;
  BackwardBuiltin backend;
  afz_caps caps;
  afz_precision precision;
  afz_conventions conventions;
};

Entry* entries(size_t* count) {
  static Entry table[] = {
      {"torch.flash",
       "PyTorch aten::_scaled_dot_product_flash_attention_backward (vendored FlashAttention-2): fp16/bf16, head_dim "
       "8..256 step 8, causal bottom-right, GQA native (per-head dK, dV summed), gradients in the input dtype, dQ by "
       "atomics",
       BackwardBuiltin(Kind::Flash, "aten::_scaled_dot_product_flash_attention_backward", AFZ_ALIGN_BOTTOM_RIGHT,
                       kFlashConventions.empty_lse),
       {backward_caps(kFused) | kFusedBackward, kHalfTypes, kHalfTypes, kFusedMinHeadDim, kFlashMaxHeadDim,
        kFusedHeadDimMultiple, 0},
       kFlashPrecision, kFlashConventions},
      {"torch.efficient",
       "PyTorch aten::_scaled_dot_product_efficient_attention_backward (CUTLASS memory-efficient): fp16/bf16, "
       "head_dim multiple of 8, causal top-left, boolean and additive masks as a 16-bit attn_bias, no GQA (see "
       "supports), gradients in the input dtype",
       BackwardBuiltin(Kind::Efficient, "aten::_scaled_dot_product_efficient_attention_backward", AFZ_ALIGN_TOP_LEFT,
                       kEfficientConventions.empty_lse),
       {backward_caps(kFused | kMasks | AFZ_CAP_DV_NE_D) | kFusedBackward, kHalfTypes, kHalfTypes, kFusedMinHeadDim,
        kNoHeadDimLimit, kFusedHeadDimMultiple, 0},
       kEfficientPrecision, kEfficientConventions},
      {"torch.cudnn",
       "PyTorch aten::_scaled_dot_product_cudnn_attention_backward (cuDNN fused flash bprop): fp16/bf16, head_dim "
       "8..256 step 8, causal top-left, masks as a 16-bit attn_bias, GQA native, gradients in the input dtype",
       BackwardBuiltin(Kind::Cudnn, "aten::_scaled_dot_product_cudnn_attention_backward", AFZ_ALIGN_TOP_LEFT,
                       kCudnnConventions.empty_lse),
       {backward_caps(kFused | kMasks | AFZ_CAP_DV_NE_D) | kFusedBackward, kHalfTypes, kHalfTypes, kFusedMinHeadDim,
        kCudnnMaxHeadDim, kFusedHeadDimMultiple, 0},
       kCudnnPrecision, kCudnnConventions},
      {"torch.math",
       "PyTorch's math path differentiated by autograd (aten::_scaled_dot_product_attention_math): fp32 scores, "
       "softmax and GEMMs for fp16/bf16 inputs, gradients rounded once to the input dtype; causal top-left, masks, "
       "GQA via enable_gqa",
       BackwardBuiltin(Kind::Math, "aten::_scaled_dot_product_attention_math", AFZ_ALIGN_TOP_LEFT,
                       kMathConventions.empty_lse),
       {kBothAlignments | kMasks | AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D | AFZ_CAP_GPU |
            AFZ_CAP_GRADS_IN_INPUT_DTYPE | AFZ_CAP_BWD_OWN_FORWARD,
        kMathTypes, kMathTypes, 1, kNoHeadDimLimit, 1, 0},
       kMathPrecision, kMathConventions},
      {"torch.flash_varlen",
       "PyTorch aten::_flash_attention_backward on packed tokens with cumulative sequence lengths (FlashAttention-2 "
       "mha_varlen_bwd): fp16/bf16, head_dim 8..256 step 8, causal and sliding windows bottom-right, GQA native "
       "(per-head dK, dV summed), zero-length sequences, gradients in the input dtype, dQ by atomics",
       BackwardBuiltin(Kind::FlashVarlen, "aten::_flash_attention_backward", AFZ_ALIGN_BOTTOM_RIGHT,
                       kFlashConventions.empty_lse),
       {backward_caps(kFused | AFZ_CAP_WINDOW) | kFusedBackward, kHalfTypes, kHalfTypes, kFusedMinHeadDim,
        kFlashMaxHeadDim, kFusedHeadDimMultiple, 0},
       kFlashPrecision, kFlashConventions},
  };
  *count = sizeof table / sizeof table[0];
  return table;
}

}  // namespace

const std::vector<afz_backward_kernel>& builtin_backward_kernels() {
  static const std::vector<afz_backward_kernel> kernels = [] {
    size_t n = 0;
    Entry* table = entries(&n);
    return abi_kernels<afz_backward_kernel>(table, n, &supports, &run);
  }();
  return kernels;
}

}  // namespace afz::torchk
