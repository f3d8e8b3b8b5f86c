#include "backward_run.h"

#include <c10/core/InferenceMode.h>

#include <limits>
#include <optional>
#include <tuple>

#include "messages.h"
#include "packed_tokens.h"
#include "problem_run.h"
#include "torch_cuda.h"
#include "torch_views.h"

namespace afz::torchk {

namespace {

BackwardTensors view_backward(const afz_backward_problem& bp, at::Device device) {
  const afz_problem& p = *bp.fwd;
  BackwardTensors t;
  t.p = &p;
  t.device = device;
  const int64_t B = p.batch, hq = p.heads_q, hkv = p.heads_kv, sq = p.max_seqlen_q, sk = p.max_seqlen_k;
  t.q = wrap(p.q, {B, hq, sq, p.head_dim}, device);
  t.k = wrap(p.k, {B, hkv, sk, p.head_dim}, device);
  t.v = wrap(p.v, {B, hkv, sk, p.head_dim_v}, device);
  t.dout = wrap(bp.dout, {B, hq, sq, p.head_dim_v}, device);
  t.out = wrap(bp.out, {B, hq, sq, p.head_dim_v}, device);
  t.lse = at::from_blob(const_cast<float*>(bp.lse), {B, hq, sq}, {bp.lse_stride[0], bp.lse_stride[1], bp.lse_stride[2]},
                        at::TensorOptions().dtype(at::kFloat).device(device));
  t.dq = wrap(bp.dq, {B, hq, sq, p.head_dim}, device);
  t.dk = wrap(bp.dk, {B, hkv, sk, p.head_dim}, device);
  t.dv = wrap(bp.dv, {B, hkv, sk, p.head_dim_v}, device);
  if (p.bool_mask.data) t.bool_mask = wrap(p.bool_mask, {B, hq, sq, sk}, device);
  if (p.add_mask.data) t.add_mask = wrap(p.add_mask, {B, hq, sq, sk}, device);
  t.seqlens_q = host_int32(p.seqlens_q, B, device);
  t.seqlens_k = host_int32(p.seqlens_k, B, device);
  return t;
}

// A sequence with keys but no queries: no row sees its keys, so their
// gradients are exactly 0 (padding rows past seqlen_k stay unwritten).
void zero_unseen_keys(const BackwardTensors& t) {
  for (size_t b = 0; b < t.seqlens_q.size(); ++b)
    if (t.seqlens_q[b] == 0 && t.seqlens_k[b] > 0) {
      t.dk.select(0, int64_t(b)).narrow(1, 0, t.seqlens_k[b]).zero_();
      t.dv.select(0, int64_t(b)).narrow(1, 0, t.seqlens_k[b]).zero_();
    }
}

CallResult run_slices(const BackwardBackend& backend, const BackwardTensors& t) {
  for (const Slice& s : plan_slices(t.seqlens_q, t.seqlens_k)) {
    auto rows = [&](const at::Tensor& x, int64_t len) { return x.narrow(0, s.b0, s.n).narrow(2, 0, len); };
    auto mask = [&](const at::Tensor& m) {
      return m.defined() ? m.narrow(0, s.b0, s.n).narrow(2, 0, s.sq).narrow(3, 0, s.sk) : m;
    };
    BackwardSlice in;
    in.q = rows(t.q, s.sq);
    in.k = rows(t.k, s.sk);
    in.v = rows(t.v, s.sk);
    in.dout = rows(t.dout, s.sq);
    in.out = rows(t.out, s.sq);
    in.lse = t.lse.narrow(0, s.b0, s.n).narrow(2, 0, s.sq);
    in.bool_mask = mask(t.bool_mask);
    in.add_mask = mask(t.add_mask);
    in.sq = s.sq;
    in.sk = s.sk;
    SliceGrads g;
    CallResult r = backend.run_slice(t, in, &g);
    if (r.status != CallResult::Ok) return r;
    for (auto [dst, src, what] : {std::tuple{rows(t.dq, s.sq), g.dq, "dq"}, std::tuple{rows(t.dk, s.sk), g.dk, "dk"},
                                  std::tuple{rows(t.dv, s.sk), g.dv, "dv"}})
      if (std::string e = src.defined() ? copy_checked(dst, src, what) : std::string("the operator returned no ") + what;
          !e.empty())
        return CallResult::failed(e);
  }
  zero_unseen_keys(t);  // a sequence without queries is no slice
  return {};
}

PackedBackward pack_backward(const BackwardTensors& t, const TokenPacking& queries, const TokenPacking& keys) {
  PackedBackward in;
  in.q = pack_tokens(t.q, queries);
  in.k = pack_tokens(t.k, keys);
  in.v = pack_tokens(t.v, keys);
  in.dout = pack_tokens(t.dout, queries);
  in.out = pack_tokens(t.out, queries);
  in.lse = pack_lse_heads_by_tokens(t.lse, queries);
  in.cu_seqlens_q = device_int32(queries.cumulative, t.device);
  in.cu_seqlens_k = device_int32(keys.cumulative, t.device);
  in.max_q = queries.max_length;
  in.max_k = keys.max_length;
  return in;
}

// One call on the whole batch; the operator itself handles sequences
// without keys or without queries, so its gradients for them are judged.
CallResult run_packed(const BackwardBackend& backend, const BackwardTensors& t) {
  const TokenPacking queries = token_packing(t.seqlens_q), keys = token_packing(t.seqlens_k);
  if (queries.total() == 0) {  // no query anywhere: no call, as the forward
    zero_unseen_keys(t);
    return {};
  }
  PackedGrads g;
  CallResult r = backend.run_packed(t, pack_backward(t, queries, keys), &g);
  if (r.status != CallResult::Ok) return r;
  for (auto [packed, dst, pk, what] : {std::tuple{g.dq, t.dq, &queries, "dq"}, std::tuple{g.dk, t.dk, &keys, "dk"},
                                       std::tuple{g.dv, t.dv, &keys, "dv"}})
    if (std::string e = unpack_tokens(packed, dst, *pk, what); !e.empty()) return CallResult::failed(e);
  return {};
}

}  // namespace

at::Tensor lse_in_convention(const at::Tensor& lse, afz_empty_lse empty_lse) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const at::Tensor empty = lse.eq(-kInf);
  switch (empty_lse) {
    case AFZ_EMPTY_LSE_POS_INF: return lse.masked_fill(empty, kInf);
    case AFZ_EMPTY_LSE_ZERO: return lse.masked_fill(empty, 0.0f);
    case AFZ_EMPTY_LSE_NAN: return lse.masked_fill(empty, std::numeric_limits<float>::quiet_NaN());
    case AFZ_EMPTY_LSE_NEG_INF: break;
  }
  return lse.clone();
}

int run_backward_backend(const BackwardBackend& backend, const afz_backward_problem* bp, char* error,
                         size_t error_len) {
  CallResult r;
  try {
    if (!bp || !bp->fwd || bp->fwd->abi_version != AFZ_ABI_VERSION) {
      write_message(error, error_len, "problem ABI version mismatch: the adapters speak version " +
                                          std::to_string(AFZ_ABI_VERSION));
      return 1;
    }
    // The fused operators only evaluate: no autograd records.  The math
    // path differentiates through autograd, so it keeps grad mode on.
    std::optional<c10::InferenceMode> no_autograd;
    if (!backend.needs_autograd()) no_autograd.emplace();
    if (std::string why = backend.missing(); !why.empty()) {
      r = CallResult::unsupported(why);
    } else if (!cuda_built()) {
      r = CallResult::unsupported("torch " + torch_version() + " was built without CUDA");
    } else {
      StreamScope scope(bp->fwd->stream);
      const BackwardTensors t = view_backward(*bp, at::Device(at::kCUDA, c10::DeviceIndex(scope.device_index())));
      poison_cached_memory(bytes_of({t.dq, t.dk, t.dv}));  // a gradient the operator never writes stays NaN
      r = backend.packed() ? run_packed(backend, t) : run_slices(backend, t);
    }
  } catch (const std::exception& e) {
    r = classify_exception(e);
  }
  if (r.status == CallResult::Ok) return 0;
  write_message(error, error_len, r.message);
  return r.status == CallResult::Unsupported ? AFZ_RUN_UNSUPPORTED : 1;
}

}  // namespace afz::torchk
