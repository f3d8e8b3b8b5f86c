#include "problem_run.h"

#include <c10/core/InferenceMode.h>

#include "messages.h"
#include "packed_tokens.h"
#include "torch_cuda.h"

namespace afz::torchk {

namespace {

ProblemTensors view_problem(const afz_problem& p, at::Device device, bool with_lse) {
  ProblemTensors t;
  t.p = &p;
  t.device = device;
  const int64_t B = p.batch, hq = p.heads_q, hkv = p.heads_kv, sq = p.max_seqlen_q, sk = p.max_seqlen_k;
  t.q = wrap(p.q, {B, hq, sq, p.head_dim}, device);
  t.k = wrap(p.k, {B, hkv, sk, p.head_dim}, device);
  t.v = wrap(p.v, {B, hkv, sk, p.head_dim_v}, device);
  t.o = wrap(p.o, {B, hq, sq, p.head_dim_v}, device);
  if (with_lse) t.lse = wrap_lse(p, device);
  if (p.bool_mask.data) t.bool_mask = wrap(p.bool_mask, {B, hq, sq, sk}, device);
  if (p.add_mask.data) t.add_mask = wrap(p.add_mask, {B, hq, sq, sk}, device);
  t.seqlens_q = host_int32(p.seqlens_q, B, device);
  t.seqlens_k = host_int32(p.seqlens_k, B, device);
  return t;
}

at::Tensor narrow_mask(const at::Tensor& m, const Slice& s) {
  if (!m.defined()) return m;
  return m.narrow(0, s.b0, s.n).narrow(2, 0, s.sq).narrow(3, 0, s.sk);
}

// [n][Hq][>= sq] (the memory-efficient kernel pads the query dimension to
// a multiple of 32) or [n][Hq][sq][1] (cuDNN's statistics) -> [n][Hq][sq].
std::string lse_rows(const at::Tensor& lse, int64_t n, int64_t heads, int64_t sq, at::Tensor* out) {
  at::Tensor t = lse;
  if (t.dim() == 4 && t.size(3) == 1) t = t.select(3, 0);
  if (t.dim() != 3 || t.size(0) != n || t.size(1) != heads || t.size(2) < sq)
    return "the operator returned an LSE of shape " + shape_text(lse.sizes()) + ", expected [" + std::to_string(n) +
           ", " + std::to_string(heads) + ", >= " + std::to_string(sq) + "]";
  *out = t.narrow(2, 0, sq);
  return "";
}

CallResult run_slices(const Backend& backend, const ProblemTensors& t) {
  const afz_problem& p = *t.p;
  for (const Slice& s : plan_slices(t.seqlens_q, t.seqlens_k)) {
    SliceTensors in;
    in.q = t.q.narrow(0, s.b0, s.n).narrow(2, 0, s.sq);
    in.k = t.k.narrow(0, s.b0, s.n).narrow(2, 0, s.sk);
    in.v = t.v.narrow(0, s.b0, s.n).narrow(2, 0, s.sk);
    in.bool_mask = narrow_mask(t.bool_mask, s);
    in.add_mask = narrow_mask(t.add_mask, s);
    in.sq = s.sq;
    in.sk = s.sk;
    in.want_lse = t.lse.defined();
    SliceOutputs out;
    CallResult r = backend.run_slice(t, in, &out);
    if (r.status != CallResult::Ok) return r;
    if (!out.o.defined()) return CallResult::failed("the operator returned no O");
    if (std::string e = copy_checked(t.o.narrow(0, s.b0, s.n).narrow(2, 0, s.sq), out.o, "O"); !e.empty())
      return CallResult::failed(e);
    if (t.lse.defined()) {
      if (!out.lse.defined()) return CallResult::failed("the operator returned no LSE");
      at::Tensor rows;
      if (std::string e = lse_rows(out.lse, s.n, p.heads_q, s.sq, &rows); !e.empty()) return CallResult::failed(e);
      if (std::string e = copy_checked(t.lse.narrow(0, s.b0, s.n).narrow(2, 0, s.sq), rows, "LSE"); !e.empty())
        return CallResult::failed(e);
    }
  }
  return {};
}

PackedTensors pack(const ProblemTensors& t) {
  const TokenPacking keys = token_packing(t.seqlens_k);
  PackedTensors pk;
  pk.queries = token_packing(t.seqlens_q);
  pk.q = pack_tokens(t.q, pk.queries);
  pk.k = pack_tokens(t.k, keys);
  pk.v = pack_tokens(t.v, keys);
  pk.cu_seqlens_q = device_int32(pk.queries.cumulative, t.device);
  pk.cu_seqlens_k = device_int32(keys.cumulative, t.device);
  pk.max_q = pk.queries.max_length;
  pk.max_k = keys.max_length;
  pk.want_lse = t.lse.defined();
  return pk;
}

CallResult run_packed(const Backend& backend, const ProblemTensors& t) {
  const afz_problem& p = *t.p;
  const PackedTensors pk = pack(t);
  const int64_t total_q = pk.queries.total();
  if (total_q == 0) return {};  // no query anywhere: nothing to write
  PackedOutputs out;
  CallResult r = backend.run_packed(t, pk, &out);
  if (r.status != CallResult::Ok) return r;
  if (std::string e = unpack_tokens(out.o, t.o, pk.queries, "O"); !e.empty())
    return CallResult::failed(e);
  const bool write_lse = t.lse.defined();
  if (write_lse && !out.lse.defined()) return CallResult::failed("the operator returned no LSE");
  for (size_t b = 0; b < t.seqlens_q.size(); ++b) {
    const int64_t sq = t.seqlens_q[b], start = pk.queries.start(b);
    if (sq == 0 || !write_lse) continue;
    at::Tensor rows;  // [Hq][sq]
    const at::Tensor& l = out.lse;
    switch (out.lse_layout) {
      case PackedLse::HeadsByTokens:
        if (l.dim() != 2 || l.size(0) != p.heads_q || l.size(1) < total_q)
          return CallResult::failed("the operator returned a packed LSE of shape " + shape_text(l.sizes()));
        rows = l.narrow(1, start, sq);
        break;
      case PackedLse::TokensByHeads:
        if (l.dim() != 2 || l.size(1) != p.heads_q || l.size(0) < total_q)
          return CallResult::failed("the operator returned a packed LSE of shape " + shape_text(l.sizes()));
        rows = l.narrow(0, start, sq).transpose(0, 1);
        break;
      case PackedLse::BatchHeadsPadded:
        if (l.dim() != 3 || l.size(0) != int64_t(t.seqlens_q.size()) || l.size(1) != p.heads_q || l.size(2) < sq)
          return CallResult::failed("the operator returned a padded LSE of shape " + shape_text(l.sizes()));
        rows = l.select(0, int64_t(b)).narrow(1, 0, sq);
        break;
    }
    t.lse.select(0, int64_t(b)).narrow(1, 0, sq).copy_(rows);
  }
  return {};
}

}  // namespace

int run_backend(const Backend& backend, const afz_problem* p, char* error, size_t error_len) {
  CallResult r;
  try {
    if (!p || p->abi_version != AFZ_ABI_VERSION) {
      write_message(error, error_len, "problem ABI version mismatch: the adapters speak version " +
                                          std::to_string(AFZ_ABI_VERSION));
      return 1;
    }
    // No autograd records, no version counters: we only evaluate.
    c10::InferenceMode no_autograd;
    if (std::string why = backend.missing(); !why.empty()) {
      r = CallResult::unsupported(why);
    } else if (backend.on_cuda() && !cuda_built()) {
      r = CallResult::unsupported("torch " + torch_version() + " was built without CUDA");
    } else if (backend.on_cuda()) {
      StreamScope scope(p->stream);
      const ProblemTensors t =
          view_problem(*p, at::Device(at::kCUDA, c10::DeviceIndex(scope.device_index())), backend.returns_lse());
      poison_cached_memory(bytes_of({t.o, t.lse}));  // an output row the operator never writes stays NaN
      r = backend.packed() ? run_packed(backend, t) : run_slices(backend, t);
    } else {
      const ProblemTensors t = view_problem(*p, at::Device(at::kCPU), backend.returns_lse());
      r = backend.packed() ? run_packed(backend, t) : run_slices(backend, t);
    }
  } catch (const std::exception& e) {
    r = classify_exception(e);
  }
  if (r.status == CallResult::Ok) return 0;
  write_message(error, error_len, r.message);
  return r.status == CallResult::Unsupported ? AFZ_RUN_UNSUPPORTED : 1;
}

std::string tensor_output(const CallResult& r, size_t index, const char* what, at::Tensor* out) {
  if (index >= r.outputs.size())
    return std::string("the operator returned ") + std::to_string(r.outputs.size()) + " value(s), no " + what +
           " at index " + std::to_string(index);
  const c10::IValue& v = r.outputs[index];
  if (!v.isTensor() || !v.toTensor().defined())
    return std::string("the operator's return ") + std::to_string(index) + " (" + what + ") is " +
           (v.isTensor() ? std::string("an undefined tensor") : describe(v) + ", not a tensor");
  *out = v.toTensor();
  return "";
}

std::string dtype_agreement(const afz_problem& p, bool out_same_as_in) {
  if (p.k.dtype != p.q.dtype || p.v.dtype != p.q.dtype) return "q, k and v must share one dtype";
  if (out_same_as_in && p.o.dtype != p.q.dtype)
    return std::string("the operator returns O in its input dtype (") + dtype_label(p.q.dtype) + "), not " +
           dtype_label(p.o.dtype);
  return "";
}

bool has_band_mask(const afz_problem& p) { return p.has_window && (p.window_left >= 0 || p.window_right >= 0); }

bool is_causal_band(const afz_problem& p) { return p.has_window && p.window_left < 0 && p.window_right == 0; }

std::vector<Arg> flash_varlen_args(const afz_problem& p, const at::Tensor& cu_seqlens_q,
                                   const at::Tensor& cu_seqlens_k, int64_t max_q, int64_t max_k) {
  const bool causal = is_causal_band(p);
  std::vector<Arg> args = {{"cum_seq_q", cu_seqlens_q},          {"cum_seq_k", cu_seqlens_k},
                           {"max_q", c10::IValue(max_q)},        {"max_k", c10::IValue(max_k)},
                           {"dropout_p", c10::IValue(0.0)},      {"is_causal", c10::IValue(causal)},
                           {"scale", c10::IValue(double(p.scale))}};
  if (has_band_mask(p) && !causal) {
    const int64_t left = p.window_left < 0 ? -1 : p.window_left, right = p.window_right < 0 ? -1 : p.window_right;
    args.push_back({"window_size_left", c10::IValue(left)});
    args.push_back({"window_size_right", c10::IValue(right)});
  }
  return args;
}

std::string alignment_refusal(const afz_problem& p, afz_align native, const char* op_name) {
  if (!has_band_mask(p) || p.align == native || alignments_coincide(p)) return "";
  const bool native_br = native == AFZ_ALIGN_BOTTOM_RIGHT;
  return std::string(op_name) + " aligns causal and window masks " + (native_br ? "bottom-right" : "top-left") +
         "; " + (native_br ? "top-left" : "bottom-right") + " differs where seqlen_q != seqlen_k";
}

}  // namespace afz::torchk
