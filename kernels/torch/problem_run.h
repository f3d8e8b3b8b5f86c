// The shape of every adapter's run(): set up the device and stream, view the
// problem's buffers, call the operator once per slice of the batch (fixed-
// length operators) or once on the packed batch (varlen operators), check
// the shapes it returns, and write O and the LSE back into the problem's
// buffers with their own strides.  A Backend supplies only the call itself.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "attnfuzz_kernel.h"
#include "packed_tokens.h"
#include "torch_ops.h"
#include "torch_views.h"

namespace afz::torchk {

// The problem as tensors, on the device the kernel runs on.
struct ProblemTensors {
  const afz_problem* p = nullptr;
  at::Device device{at::kCPU};
  at::Tensor q, k, v;                 // [B][H][S_max][D] views
  at::Tensor o;                       // [B][Hq][Sq_max][Dv] view, written
  at::Tensor lse;                     // [B][Hq][Sq_max] fp32 view; undefined without one to write
  at::Tensor bool_mask, add_mask;     // [B][Hq][Sq_max][Sk_max] views, or undefined
  std::vector<int32_t> seqlens_q, seqlens_k;  // host copies
};

// One slice of the batch, every tensor narrowed to its valid rows.
struct SliceTensors {
  at::Tensor q, k, v;                 // [n][H][sq|sk][D], problem strides
  at::Tensor bool_mask, add_mask;     // [n][Hq][sq][sk] or undefined
  int64_t sq = 0, sk = 0;
  bool want_lse = false;
};
struct SliceOutputs {
  at::Tensor o;                       // [n][Hq][sq][Dv], any strides and dtype
  at::Tensor lse;                     // [n][Hq][>= sq] or [n][Hq][>= sq][1], natural log
};

// The batch packed for a varlen operator (FlashAttention's layout).
struct PackedTensors {
  at::Tensor q, k, v;                 // [total][H][D], contiguous
  at::Tensor cu_seqlens_q, cu_seqlens_k;  // int32 [B + 1] on the device
  TokenPacking queries;               // host offsets of each sequence's queries
  int64_t max_q = 0, max_k = 0;
  bool want_lse = false;
};
enum class PackedLse {
  HeadsByTokens,     // [Hq][total_q]   (FlashAttention >= 2.5 varlen)
  TokensByHeads,     // [total_q][Hq]
  BatchHeadsPadded,  // [B][Hq][>= max_q] (older FlashAttention varlen)
};
struct PackedOutputs {
  at::Tensor o;                       // [total_q][Hq][Dv]
  at::Tensor lse;
  PackedLse lse_layout = PackedLse::HeadsByTokens;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool on_cuda() const = 0;
  virtual bool packed() const { return false; }
  // Whether the operator returns an LSE.  The attnfuzz worker hands every
  // GPU kernel an LSE buffer, AFZ_CAP_LSE or not; one without leaves it alone.
  virtual bool returns_lse() const = 0;
  // "" when the installed torch can run it, else why not ("torch 1.13.0 has no aten::...").
  virtual std::string missing() const = 0;
  virtual CallResult run_slice(const ProblemTensors&, const SliceTensors&, SliceOutputs*) const {
    return CallResult::failed("no fixed-length call");
  }
  virtual CallResult run_packed(const ProblemTensors&, const PackedTensors&, PackedOutputs*) const {
    return CallResult::failed("no packed call");
  }
};

// The whole of an adapter's run(): 0, AFZ_RUN_UNSUPPORTED or 1 with a
// one-line message in `error`.  Never throws.
int run_backend(const Backend& backend, const afz_problem* p, char* error, size_t error_len);

// An output of a call as a defined tensor, or why not.
std::string tensor_output(const CallResult& r, size_t index, const char* what, at::Tensor* out);

// Shared by the adapters' supports(): q, k and v of one dtype, and O in that
// dtype too when the operator returns O in its input dtype.  "" when fine.
std::string dtype_agreement(const afz_problem& p, bool out_same_as_in);
// Whether the problem carries a causal or window mask at all ((-1, -1) is none).
bool has_band_mask(const afz_problem& p);
bool is_causal_band(const afz_problem& p);
// The arguments FlashAttention's varlen forward and backward share
// (aten::_flash_attention_forward, _flash_attention_backward): cumulative
// lengths and their maxima, no dropout, the scale, and the band: is_causal
// for plain causal, window_size_left/right for any other window (-1: an
// unbounded side).
std::vector<Arg> flash_varlen_args(const afz_problem& p, const at::Tensor& cu_seqlens_q,
                                   const at::Tensor& cu_seqlens_k, int64_t max_q, int64_t max_k);
// Why an operator aligning causal and window masks `native` (its only
// alignment) cannot run p: "" when p asks for that alignment, has no band
// mask, or both alignments give the same mask (seqlen_q == seqlen_k).
std::string alignment_refusal(const afz_problem& p, afz_align native, const char* op_name);

}  // namespace afz::torchk
