// cudnn.sdpa [bwd].  run() in the worker: copy the seq lengths to the host
// (they decide the padded path), merge a boolean mask into the bias, pack
// Q, K, V, O, dO and the LSE into dense scratch (strided_copy: any strides
// and dtypes the harness uses, padding rows zero), describe the graph
// (sdpa_bwd_graph), find or build its plan, clear the dQ accumulator,
// execute on the problem's stream, scatter dQ, dK, dV's valid rows back.
#include "kernels/cudnn/cudnn_sdpa_bwd_kernel.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cudnn/cudnn_runtime.h"
#include "kernels/cudnn/sdpa_bwd_graph.h"
#include "kernels/cudnn/sdpa_graph.h"
#include "kernels/cudnn/strided_copy.h"

namespace afz::cudnn {
namespace {

// cudnn-frontend's support surface for the backward: head dims above 128
// from cuDNN 9.23 on (its v1.24.1 release notes: "SDPA backward now supports
// hidden dimension d=256. Requires cuDNN 9.23.0 or later").
constexpr size_t kCudnn9_23_0 = 92300;
constexpr int kMaxHeadDimBefore9_23 = 128;
// Backward plans kept per worker (see the forward's cache).
constexpr size_t kPlanCacheEntries = 64;

// The dense scratch tensors cuDNN is given.
enum class Scratch : int { Q, K, V, O, DO, Lse, DQ, DK, DV, DQAccum, Count };

struct Session {
  std::mutex mu;
  std::unordered_map<int, cudnnHandle_t> handles;
  PlanCache plans{kPlanCacheEntries};
  DeviceBuffer workspace, seqlens, bias;
  std::array<DeviceBuffer, size_t(Scratch::Count)> scratch;
  std::vector<int32_t> host_q, host_k;
};

Session& session() {
  static Session* s = new Session;  // never destroyed: see the forward's Session
  return *s;
}

size_t dtype_bytes(afz_dtype t) { return t == AFZ_F32 ? 4 : 2; }

afz_tensor dense_tensor(void* data, afz_dtype dtype, const Dims& dims) {
  afz_tensor t{};
  t.data = data;
  t.dtype = dtype;
  const Dims st = dense_strides(dims);
  for (int a = 0; a < 4; ++a) t.stride[a] = st[a];
  return t;
}

bool is_gradient_dtype(afz_dtype t) { return t == AFZ_F32 || t == AFZ_F16 || t == AFZ_BF16; }

// Shapes and dtypes only: safe on the worker's device problem.
std::string shape_reason(const afz_backward_problem& bp, size_t version) {
  if (version < kCudnnBackwardMinVersion)
    return "cuDNN " + version_text(version) + " predates the SDPA backward pattern this adapter builds (cuDNN 9.0)";
  const afz_problem& f = *bp.fwd;
  // The forward's rules on the tensors as cuDNN sees them: dense scratch
  // copies of Q, K, V (and O), whatever the harness's strides.
  afz_problem seen = f;
  seen.q = dense_tensor(f.q.data, f.q.dtype, {f.batch, f.heads_q, f.max_seqlen_q, f.head_dim});
  seen.k = dense_tensor(f.k.data, f.k.dtype, {f.batch, f.heads_kv, f.max_seqlen_k, f.head_dim});
  seen.v = dense_tensor(f.v.data, f.v.dtype, {f.batch, f.heads_kv, f.max_seqlen_k, f.head_dim_v});
  seen.o = dense_tensor(nullptr, f.q.dtype, {f.batch, f.heads_q, f.max_seqlen_q, f.head_dim_v});
  seen.lse = nullptr;
  if (std::string why = sdpa_unsupported_reason(seen, version); !why.empty()) return why;
  if (version < kCudnn9_23_0 && (f.head_dim > kMaxHeadDimBefore9_23 || f.head_dim_v > kMaxHeadDimBefore9_23))
    return "head dims above 128 in the SDPA backward need cuDNN 9.23 (cudnn-frontend's support surface)";
  if (bp.dout.dtype != f.q.dtype) return "dO must have the input dtype (an operand of the dO.V^T and P^T.dO GEMMs)";
  if (bp.out.dtype != f.q.dtype && bp.out.dtype != AFZ_F32) return "O must be fp32 or the input dtype";
  for (const afz_tensor* g : {&bp.dq, &bp.dk, &bp.dv})
    if (!is_gradient_dtype(g->dtype)) return "dQ, dK and dV must be fp32, fp16 or bf16";
  return "";
}

std::string unsupported_reason_with(const afz_backward_problem& bp, const CudnnLibrary& lib) {
  if (!lib.loaded) return lib.describe();
  if (std::string why = shape_reason(bp, lib.version); !why.empty()) return why;
  const afz_problem& f = *bp.fwd;
  if (!f.seqlens_q || !f.seqlens_k) return "";
  return seqlen_unsupported_reason(f, f.seqlens_q, f.seqlens_k);
}

class Runner {
 public:
  Runner(const CudnnLibrary& lib, Session& s, const afz_backward_problem& bp)
      : lib_(lib), s_(s), bp_(bp), f_(*bp.fwd), run_(*bp.fwd), stream_(static_cast<cudaStream_t>(f_.stream)) {}

  RunError run() {
    AFZ_TRY(device_handle(lib_, &s_.handles, stream_, &device_, &handle_));
    AFZ_TRY(copy_seqlens(f_, stream_, &s_.seqlens, &s_.host_q, &s_.host_k, &seq_q_, &seq_kv_));
    if (std::string why = seqlen_unsupported_reason(f_, s_.host_q.data(), s_.host_k.data()); !why.empty())
      return unsupported_error(lib_, why);
    if (f_.bool_mask.data) AFZ_TRY(merge_bool_mask_on_device(f_, stream_, &s_.bias, &run_));
    AFZ_TRY(pack_inputs());

    SdpaGraphOptions o;
    o.padded = needs_padding(run_, s_.host_q.data(), s_.host_k.data());
    o.cudnn_version = lib_.version;
    // Scratch comes from cudaMalloc (256-byte aligned); only a harness bias is not ours.
    if (run_.add_mask.data) o.alignment[size_t(Binding::Bias)] = pointer_alignment(run_.add_mask.data);
    const SdpaGraph graph = build_sdpa_bwd_graph(run_, o, o_dtype());

    SdpaPlan* plan = nullptr;
    // cuDNN's backward sums dQ with atomics in its default (accumulator)
    // form: the kernel is declared nondeterministic, so such engines may run.
    AFZ_TRY(cached_plan(lib_, &s_.plans, handle_, device_, graph, Determinism::Allowed, &plan));
    AFZ_TRY(poisoned_workspace(&s_.workspace, size_t(plan->workspace_bytes), stream_));
    AFZ_TRY(clear_outputs());
    AFZ_TRY(execute_plan(lib_, handle_, graph, *plan, [this](Binding b) { return pointer(b); }, s_.workspace.ptr));
    AFZ_TRY(scatter_gradients());
    // The session's buffers serve the next call: none may still be in use.
    AFZ_TRY_CUDA(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (after cudnnBackendExecute)");
    return {};
  }

 private:
  afz_dtype o_dtype() const { return bp_.out.dtype == AFZ_F32 ? AFZ_F32 : f_.q.dtype; }

  Dims q_dims(int64_t width) const { return {f_.batch, f_.heads_q, f_.max_seqlen_q, width}; }
  Dims kv_dims(int64_t width) const { return {f_.batch, f_.heads_kv, f_.max_seqlen_k, width}; }

  // A dense scratch tensor of `dims`, grown and cleared to `fill` bytes.
  RunError scratch(Scratch which, afz_dtype dtype, const Dims& dims, int fill, afz_tensor* out) {
    const size_t bytes = size_t(dims[0] * dims[1] * dims[2] * dims[3]) * dtype_bytes(dtype);
    DeviceBuffer& b = s_.scratch[size_t(which)];
    AFZ_TRY(ensure(&b, bytes, "backward scratch"));
    AFZ_TRY_CUDA(cudaMemsetAsync(b.ptr, fill, bytes, stream_), "cudaMemsetAsync (backward scratch)");
    *out = dense_tensor(b.ptr, dtype, dims);
    return {};
  }

  // Zeroed scratch, then the valid rows of `src` (rows < limit[b]) converted into it.
  RunError pack(Scratch which, const afz_tensor& src, afz_dtype dtype, const Dims& dims, const int32_t* limit,
                afz_tensor* out) {
    AFZ_TRY(scratch(which, dtype, dims, 0, out));
    AFZ_TRY_CUDA(strided_copy(src, *out, {dims[0], dims[1], dims[2], dims[3]}, limit, stream_),
                 "strided_copy (packing a backward input)");
    return {};
  }

  RunError pack_inputs() {
    const afz_dtype io = f_.q.dtype;
    AFZ_TRY(pack(Scratch::Q, f_.q, io, q_dims(f_.head_dim), seq_q_, &q_));
    AFZ_TRY(pack(Scratch::K, f_.k, io, kv_dims(f_.head_dim), seq_kv_, &k_));
    AFZ_TRY(pack(Scratch::V, f_.v, io, kv_dims(f_.head_dim_v), seq_kv_, &v_));
    AFZ_TRY(pack(Scratch::O, bp_.out, o_dtype(), q_dims(f_.head_dim_v), seq_q_, &o_));
    AFZ_TRY(pack(Scratch::DO, bp_.dout, io, q_dims(f_.head_dim_v), seq_q_, &do_));
    afz_tensor lse{};
    lse.data = const_cast<float*>(bp_.lse);
    lse.dtype = AFZ_F32;
    for (int a = 0; a < 3; ++a) lse.stride[a] = bp_.lse_stride[a];
    lse.stride[3] = 1;
    AFZ_TRY(pack(Scratch::Lse, lse, AFZ_F32, q_dims(1), seq_q_, &lse_));
    run_.q = q_;
    run_.k = k_;
    run_.v = v_;
    return {};
  }

  // The gradient scratch starts as NaN (kNanFillByte), so that an element
  // cuDNN never writes reaches the verdict as NaN, not as a plausible zero.
  RunError clear_outputs() {
    const afz_dtype io = f_.q.dtype;
    AFZ_TRY(scratch(Scratch::DQ, io, q_dims(f_.head_dim), kNanFillByte, &dq_));
    AFZ_TRY(scratch(Scratch::DK, io, kv_dims(f_.head_dim), kNanFillByte, &dk_));
    AFZ_TRY(scratch(Scratch::DV, io, kv_dims(f_.head_dim_v), kNanFillByte, &dv_));
    // The engine adds every key block's dQ into the accumulator: it must start at zero.
    AFZ_TRY(scratch(Scratch::DQAccum, AFZ_F32, q_dims(f_.head_dim), 0, &dq_acc_));
    return {};
  }

  RunError scatter_gradients() {
    struct Out {
      const afz_tensor& from;
      const afz_tensor& to;
      Dims dims;
      const int32_t* limit;
    };
    for (const Out& g : {Out{dq_, bp_.dq, q_dims(f_.head_dim), seq_q_}, Out{dk_, bp_.dk, kv_dims(f_.head_dim), seq_kv_},
                         Out{dv_, bp_.dv, kv_dims(f_.head_dim_v), seq_kv_}})
      AFZ_TRY_CUDA(strided_copy(g.from, g.to, {g.dims[0], g.dims[1], g.dims[2], g.dims[3]}, g.limit, stream_),
                   "strided_copy (a gradient out of cuDNN's scratch)");
    return {};
  }

  void* pointer(Binding b) const {
    switch (b) {
      case Binding::Q: return q_.data;
      case Binding::K: return k_.data;
      case Binding::V: return v_.data;
      case Binding::O: return o_.data;
      case Binding::DO: return do_.data;
      case Binding::Stats: return lse_.data;
      case Binding::SeqLenQ: return seq_q_;
      case Binding::SeqLenKv: return seq_kv_;
      case Binding::Bias: return run_.add_mask.data;
      case Binding::DQ: return dq_.data;
      case Binding::DK: return dk_.data;
      case Binding::DV: return dv_.data;
      case Binding::DQAccum: return dq_acc_.data;
      default: return nullptr;
    }
  }

  const CudnnLibrary& lib_;
  Session& s_;
  const afz_backward_problem& bp_;  // as the harness gave it
  const afz_problem& f_;
  afz_problem run_;  // as cuDNN sees it: packed Q/K/V, the merged bias
  cudaStream_t stream_;
  int device_ = 0;
  cudnnHandle_t handle_ = nullptr;
  int32_t* seq_q_ = nullptr;
  int32_t* seq_kv_ = nullptr;
  afz_tensor q_{}, k_{}, v_{}, o_{}, do_{}, lse_{}, dq_{}, dk_{}, dv_{}, dq_acc_{};
};

// In the harness, on the host problem: seq lengths readable, no CUDA call.
int supports(const afz_backward_kernel*, const afz_backward_problem* p, char* reason, size_t len) {
  const std::string why = unsupported_reason_with(*p, cudnn_library());
  if (why.empty()) return 0;
  write_message(reason, len, why);
  return 1;
}

// A process with no usable device (a CPU machine, a driver older than the
// runtime) cannot run the kernel: `unsupported`, as the forward's harness
// path says for GPU kernels there, not a crash of the kernel.
std::string no_device_reason() {
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return std::string("no usable CUDA device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return count > 0 ? "" : "no CUDA device";
}

int run(const afz_backward_kernel*, const afz_backward_problem* p, char* error, size_t len) {
  try {
    if (const std::string why = no_device_reason(); !why.empty()) {
      write_message(error, len, why);
      return AFZ_RUN_UNSUPPORTED;
    }
    const CudnnLibrary& lib = cudnn_library();
    // The worker may have found another library (or none) than the harness.
    const std::string why = lib.loaded ? shape_reason(*p, lib.version) : lib.describe();
    if (!why.empty()) {
      write_message(error, len, why);
      return AFZ_RUN_UNSUPPORTED;
    }
    Session& s = session();
    std::lock_guard<std::mutex> lock(s.mu);
    const RunError e = Runner(lib, s, *p).run();
    if (e.code) write_message(error, len, e.message);
    return e.code;
  } catch (const std::exception& e) {
    write_message(error, len, std::string("cudnn.sdpa [bwd]: ") + e.what());
    return 1;
  }
}

constexpr afz_caps kCaps = {
    AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW | AFZ_CAP_BOOL_MASK | AFZ_CAP_ADD_MASK |
        AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D | AFZ_CAP_GPU | AFZ_CAP_NONDETERMINISTIC |
        AFZ_CAP_GRADS_IN_INPUT_DTYPE,
    (1u << AFZ_F16) | (1u << AFZ_BF16),
    (1u << AFZ_F16) | (1u << AFZ_BF16),
    /*min_head_dim=*/8, /*max_head_dim=*/256, /*head_dim_multiple=*/8,
    /*max_seqlen=*/0};

// What the graph specifies: S = Q.K^T on tensor cores with fp32
// accumulation, P = exp(S - Stats) and dS = P (dP - D) scale in fp32, P^T and
// dS^T rounded to the input dtype as operands of the dV and dK GEMMs (and K
// in it for dQ), every GEMM accumulated in fp32, dQ summed across key blocks
// in an fp32 accumulator.  exp as the forward's (ex2.approx.ftz: 4 ulps
// declared, subnormals flushed).  The gradients cuDNN writes are rounded to
// the input dtype (the graph's dQ, dK, dV tensors; under GQA dK and dV are
// also rounded per query head before the sum over the group): declared by
// AFZ_CAP_GRADS_IN_INPUT_DTYPE, whose bound charges both roundings.
constexpr afz_precision kPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/4.0f,
                                      /*flush_subnormals=*/1, /*l_from_unrounded_p=*/0};
constexpr afz_conventions kConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};

const afz_backward_kernel kKernel = {
    "cudnn.sdpa",
    "cuDNN fused flash-attention backward: cudnn-frontend's SDPA backward node graph (dO.O row sums, Q.K^T, "
    "masks, exp(S - Stats), P^T.dO, dO.V^T, dS, dS^T.Q, dS.K into an fp32 accumulator) through cuDNN 9's backend "
    "API on its runtime-fusion engine; dQ summed with atomics (nondeterministic); libcudnn dlopen'ed "
    "($ATTNFUZZ_CUDNN_LIB or libcudnn.so.9)",
    kCaps,
    kPrecision,
    kConventions,
    &supports,
    &run,
    nullptr,
};

}  // namespace

const afz_backward_kernel& cudnn_sdpa_backward_kernel() { return kKernel; }

std::string cudnn_sdpa_backward_unsupported_reason(const afz_backward_problem& p, const CudnnLibrary& lib) {
  return unsupported_reason_with(p, lib);
}

}  // namespace afz::cudnn
