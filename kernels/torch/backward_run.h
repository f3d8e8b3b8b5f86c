// The shape of every backward adapter's run(), as problem_run.h is for the
// forward: set up the device and stream, view the backward problem's
// buffers (dO, O and LSE in; dQ, dK, dV out), call the operator once per
// slice of the batch (fixed-length operators) or once on the packed batch
// (varlen operators), check the shapes of the gradients it returns, and
// write them into the problem's buffers.  A BackwardBackend supplies only
// the call itself.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "attnfuzz_kernel.h"
#include "torch_ops.h"

namespace afz::torchk {

// The backward problem as tensors, on the device the kernel runs on.
struct BackwardTensors {
  const afz_problem* p = nullptr;
  at::Device device{at::kCPU};
  at::Tensor q, k, v;               // [B][H][S_max][D] views
  at::Tensor dout, out;             // [B][Hq][Sq_max][Dv] views, inputs
  at::Tensor lse;                   // [B][Hq][Sq_max] fp32 view, input (natural log, -inf for empty rows)
  at::Tensor dq, dk, dv;            // views of the outputs
  at::Tensor bool_mask, add_mask;   // [B][Hq][Sq_max][Sk_max] views, or undefined
  std::vector<int32_t> seqlens_q, seqlens_k;  // host copies
};

// One slice of the batch, every tensor narrowed to its valid rows.
struct BackwardSlice {
  at::Tensor q, k, v, dout, out, lse;  // lse [n][Hq][sq]
  at::Tensor bool_mask, add_mask;
  int64_t sq = 0, sk = 0;
};
struct SliceGrads {
  at::Tensor dq, dk, dv;  // [n][Hq][sq][D], [n][Hkv][sk][D], [n][Hkv][sk][Dv]; any strides and dtype
};

// The batch packed for a varlen backward operator (FlashAttention's layout).
struct PackedBackward {
  at::Tensor q, k, v, dout, out;          // [total][H][D], contiguous
  at::Tensor lse;                         // [Hq][total_q] fp32, contiguous, -inf for empty rows
  at::Tensor cu_seqlens_q, cu_seqlens_k;  // int32 [B + 1] on the device
  int64_t max_q = 0, max_k = 0;
};
struct PackedGrads {
  at::Tensor dq, dk, dv;  // [total_q][Hq][D], [total_k][Hkv][D], [total_k][Hkv][Dv]
};

class BackwardBackend {
 public:
  virtual ~BackwardBackend() = default;
  // "" when the installed torch can run it, else why not.
  virtual std::string missing() const = 0;
  // Whether the call records an autograd graph (the math path): run() then
  // leaves inference mode off.
  virtual bool needs_autograd() const { return false; }
  // Whether the operator takes the whole batch packed (run_packed) rather
  // than one slice of equal lengths at a time (run_slice).
  virtual bool packed() const { return false; }
  virtual CallResult run_slice(const BackwardTensors& t, const BackwardSlice& in, SliceGrads* out) const = 0;
  virtual CallResult run_packed(const BackwardTensors&, const PackedBackward&, PackedGrads*) const {
    return CallResult::failed("no packed call");
  }
};

// The whole of a backward adapter's run(): 0, AFZ_RUN_UNSUPPORTED or 1 with
// a one-line message in `error`.  Never throws.  Keys of a sequence without
// queries get dK = dV = 0 without a call (no row sees them) where no call
// covers them: slice by slice, or a packed batch with no query at all (a
// packed call with queries somewhere writes them itself).
int run_backward_backend(const BackwardBackend& backend, const afz_backward_problem* p, char* error,
                         size_t error_len);

// The given LSE with the empty rows' -inf replaced by what the library's own
// forward writes there (`empty_lse`): its backward reads its own convention.
at::Tensor lse_in_convention(const at::Tensor& lse, afz_empty_lse empty_lse);

}  // namespace afz::torchk
